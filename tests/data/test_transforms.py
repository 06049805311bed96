"""Batch transforms against exact references."""

import pytest
import torch
import torch.nn.functional as F

from vitpos.data.transforms import (
    Augment,
    cutmix_,
    mixup_,
    normalize,
    random_erasing_,
    random_hflip,
    random_resized_crop,
    resize,
    smooth_one_hot,
    soft_cross_entropy,
)


def test_full_crop_is_the_identity():
    x = torch.rand(3, 3, 12, 20)
    out = random_resized_crop(x, (12, 20), scale=(1.0, 1.0), ratio=(20 / 12, 20 / 12))
    assert torch.allclose(out, x, atol=1e-5)


@pytest.mark.parametrize("h,w,ratio", [(32, 32, 1.0), (16, 32, 2.0), (16, 32, 0.5)])
def test_crop_takes_the_asked_area_and_aspect(h, w, ratio):
    # ramps along x and y: each output row (column) is linear with slope crop size / image size
    xs = ((torch.arange(w) + 0.5) / w).expand(4, 1, h, w)
    ys = ((torch.arange(h) + 0.5) / h).view(h, 1).expand(4, 1, h, w)
    torch.manual_seed(0)
    out_x = random_resized_crop(xs.clone(), (h, w), scale=(0.25, 0.25), ratio=(ratio, ratio))
    torch.manual_seed(0)
    out_y = random_resized_crop(ys.clone(), (h, w), scale=(0.25, 0.25), ratio=(ratio, ratio))
    # interior samples only: at the image border bilinear sampling clamps to the edge pixel
    crop_w = (out_x[..., 3:-2] - out_x[..., 2:-3]).mean(dim=(1, 2, 3)) * w * w  # in input pixels
    crop_h = (out_y[..., 3:-2, :] - out_y[..., 2:-3, :]).mean(dim=(1, 2, 3)) * h * h
    expected_w = min((0.25 * h * w * ratio) ** 0.5, w)
    expected_h = min((0.25 * h * w / ratio) ** 0.5, h)
    assert torch.allclose(crop_w, torch.full((4,), expected_w), rtol=1e-4)
    assert torch.allclose(crop_h, torch.full((4,), expected_h), rtol=1e-4)
    assert out_x.min() >= 0 and out_x.max() <= 1


def test_crop_to_another_size():
    x = torch.rand(2, 3, 16, 16)
    out = random_resized_crop(x, (24, 8))
    assert out.shape == (2, 3, 24, 8)
    assert out.min() >= x.min() and out.max() <= x.max()  # bilinear samples lie between the pixels
    flat = random_resized_crop(torch.full((2, 3, 16, 16), 0.25), (24, 8))
    torch.testing.assert_close(flat, torch.full_like(flat, 0.25))


def test_hflip_probability_extremes():
    x = torch.rand(5, 3, 4, 6)
    assert torch.equal(random_hflip(x, 1.0), x.flip(-1))
    assert torch.equal(random_hflip(x, 0.0), x)


def test_resize_keeps_uint8_and_constant_images():
    x = torch.full((2, 3, 8, 8), 200, dtype=torch.uint8)
    for size in ((16, 16), (4, 6)):
        out = resize(x, size)
        assert out.dtype == torch.uint8 and out.shape == (2, 3, *size) and (out == 200).all()
    assert resize(x, (8, 8)) is x


def test_normalize_per_channel():
    x = torch.ones(1, 2, 3, 3)
    out = normalize(x, (0.5, 1.0), (0.25, 2.0))
    assert torch.allclose(out[0, 0], torch.full((3, 3), 2.0)) and torch.allclose(out[0, 1], torch.zeros(3, 3))


def test_normalize_scales_uint8_in_the_same_pass():
    x = torch.randint(0, 256, (2, 3, 5, 4), dtype=torch.uint8)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    out = normalize(x, mean, std)
    want = (x.double() / 255 - torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1)) / torch.tensor(
        std, dtype=torch.float64
    ).view(1, 3, 1, 1)
    assert out.dtype == torch.float32 and torch.allclose(out.double(), want, atol=1e-5)


def test_label_smoothing_matches_torch():
    logits, labels = torch.randn(6, 5), torch.randint(5, (6,))
    soft = smooth_one_hot(labels, 5, 0.1)
    assert torch.allclose(soft.sum(-1), torch.ones(6))
    assert torch.allclose(soft_cross_entropy(logits, soft), F.cross_entropy(logits, labels, label_smoothing=0.1))


def test_mixup_blends_with_the_mirrored_batch():
    x, t = torch.rand(4, 3, 8, 8), smooth_one_hot(torch.tensor([0, 1, 2, 3]), 4)
    mixed, targets = x.clone(), t.clone()
    lam = mixup_(mixed, targets, alpha=0.4)
    assert torch.allclose(mixed, lam * x + (1 - lam) * x.flip(0))
    assert torch.allclose(targets[:, 0], torch.tensor([lam, 0, 0, 1 - lam]))
    assert torch.allclose(targets.sum(-1), torch.ones(4))


def test_cutmix_target_weight_is_the_pasted_area():
    x = torch.arange(4.0).view(4, 1, 1, 1).expand(4, 3, 16, 16).clone()  # constant, distinct images
    t = smooth_one_hot(torch.arange(4), 4)
    for _ in range(5):
        mixed, targets = x.clone(), t.clone()
        lam = cutmix_(mixed, targets, alpha=1.0)
        pasted = (mixed[0, 0] == 3.0).float().mean().item()
        assert pasted == pytest.approx(1 - lam)
        # sample i holds its own pixels outside one box and sample 3 - i's inside it
        assert torch.equal(mixed[3, 0] == 0.0, mixed[0, 0] == 3.0) and ((mixed[0] == 0) | (mixed[0] == 3)).all()
        assert targets[0, 0].item() == pytest.approx(lam) and targets[0, 3].item() == pytest.approx(1 - lam)


def test_augment_without_mixing_keeps_hard_labels():
    aug = Augment((0.5,) * 3, (0.5,) * 3, num_classes=3, crop_scale=0.5, hflip=0.5)
    x, y = aug(torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8), torch.tensor([0, 1, 2, 0]))
    assert x.dtype == torch.float32 and x.min() >= -1 and x.max() <= 1 and torch.equal(y, torch.tensor([0, 1, 2, 0]))
    mixing = Augment((0.0,) * 3, (1.0,) * 3, num_classes=3, mixup_alpha=0.2, cutmix_alpha=1.0, label_smoothing=0.1)
    _, soft = mixing(torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.tensor([0, 1, 2, 0]))
    assert soft.shape == (4, 3) and torch.allclose(soft.sum(-1), torch.ones(4))


def test_random_erasing_fills_one_box_per_image_with_noise():
    torch.manual_seed(0)
    x = torch.zeros(400, 3, 20, 30)
    out = random_erasing_(x.clone(), p=1.0)
    erased = out[:, 0] != 0
    area = erased.float().mean(dim=(1, 2))
    assert (area > 0).float().mean() > 0.9  # nearly every draw finds a box that fits in ten tries
    hit = area > 0
    assert area[hit].min() >= 0.015 and area[hit].max() <= 0.36  # 2% .. 1/3 of the image, up to rounding
    rows, cols = erased.any(2).sum(1), erased.any(1).sum(1)
    assert torch.equal((rows * cols)[hit], erased.sum(dim=(1, 2))[hit])  # one axis-aligned box
    noise = out[erased.unsqueeze(1).expand_as(out)]
    assert torch.equal(out[:, 1] != 0, erased) and 0.95 < noise.std() < 1.05  # every channel, normal noise
    assert torch.equal(random_erasing_(x.clone(), p=0.0), x)
    kept = random_erasing_(x.clone(), p=0.25)
    assert 0.15 < (kept != 0).flatten(1).any(1).float().mean() < 0.35


@pytest.mark.parametrize("switch,expect_cutmix", [(1.0, True), (0.0, False)])
def test_mixup_switch_picks_cutmix_or_mixup(switch, expect_cutmix):
    aug = Augment((0.0,) * 3, (1.0,) * 3, num_classes=4, mixup_alpha=0.8, cutmix_alpha=1.0, mixup_switch=switch)
    images = (torch.arange(4) * 60).view(4, 1, 1, 1).expand(4, 3, 16, 16).to(torch.uint8)
    for seed in range(5):
        torch.manual_seed(seed)
        x, _ = aug(images, torch.arange(4))
        pure = torch.isin(x[0], images.float().div(255).unique()).all()  # cutmix only moves whole pixels
        assert bool(pure) == expect_cutmix
