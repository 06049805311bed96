"""Per-image crops: RandomResizedCrop's statistics, draft decoding, the evaluation crop."""

import io
import math

import numpy as np
import pytest
import torch
from PIL import Image

from vitpos.data.crops import EvalCrop, TrainCrop, centre_box, random_resized_box
from vitpos.data.decode import crop_resize, open_image, to_tensor


@pytest.mark.parametrize("width,height", [(500, 375), (375, 500), (256, 256)])
def test_random_resized_crop_covers_the_scale_and_ratio_range(width, height):
    rng = np.random.default_rng(0)
    boxes = np.array([random_resized_box(rng, width, height, (0.08, 1.0), (3 / 4, 4 / 3)) for _ in range(4000)])
    left, top, w, h = boxes.T
    assert (left >= 0).all() and (top >= 0).all() and (left + w <= width).all() and (top + h <= height).all()
    area = w * h / (width * height)
    log_aspect = np.log(w / h)
    # the asked ranges, up to rounding to whole pixels, and nearly all of each range is reached
    assert area.min() >= 0.079 and area.max() <= 1.0
    assert np.quantile(area, 0.01) < 0.1 and np.quantile(area, 0.99) > 0.85
    assert log_aspect.min() >= math.log(3 / 4) - 0.02 and log_aspect.max() <= math.log(4 / 3) + 0.02
    # accepted draws are uniform in area fraction where the box always fits (small areas)
    small = area[area < 0.4]
    counts, _ = np.histogram(small, bins=4, range=(0.08, 0.4))
    assert counts.min() > 0.8 * counts.mean()
    # the crop centre moves over the whole image
    assert (left + w / 2).min() < 0.2 * width and (left + w / 2).max() > 0.8 * width


def test_crop_of_a_thin_image_falls_back_to_the_centre_at_the_nearest_ratio():
    rng = np.random.default_rng(0)
    assert random_resized_box(rng, 1000, 10, (0.9, 1.0), (3 / 4, 4 / 3)) == ((1000 - 13) // 2, 0, 13, 10)


def _jpeg(width, height, seed=0):
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (height // 16, width // 16, 3), dtype=np.uint8))
    buf = io.BytesIO()
    coarse.resize((width, height), Image.Resampling.BICUBIC).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def test_draft_decoding_matches_a_full_decode():
    data = _jpeg(800, 600)
    box = (100, 50, 400, 300)  # half the width, shrunk to a quarter of itself: decoding at 1/4 scale suffices
    drafted = open_image(data)
    small = crop_resize(drafted, box, (75, 100), "RGB")
    assert drafted.size == (200, 150)  # decoded at a quarter of the size
    full = (
        Image.open(io.BytesIO(data)).convert("RGB").resize((100, 75), Image.Resampling.BICUBIC, box=(100, 50, 500, 350))
    )
    diff = (to_tensor(small).float() - to_tensor(full).float()).abs()
    assert diff.mean() < 3 and to_tensor(small).shape == (3, 75, 100)


def test_eval_crop_resizes_the_shorter_side_then_takes_the_centre():
    assert centre_box(500, 400, (224, 224), 0.875) == pytest.approx((75, 25, 350, 350))
    ramp = np.tile(np.arange(256, dtype=np.uint8), (128, 1))  # grey ramp: value = x
    out = EvalCrop((16, 16), "L", crop_fraction=0.5)(Image.fromarray(ramp))
    # shorter side 128 -> 32 px, so 4 source px per output px; the centre 64 px span x = 96 .. 160
    expected = 96 + 4 * torch.arange(16) + 1.5  # the mean of each output pixel's 4 source columns
    assert out.shape == (1, 16, 16) and (out[0].float() - expected).abs().max() <= 1


def test_train_crop_is_a_function_of_its_seed():
    img = Image.fromarray(np.random.default_rng(1).integers(0, 256, (40, 60, 3), dtype=np.uint8))
    crop = TrainCrop((16, 16))
    a, b = crop(img, np.random.default_rng(5)), crop(img, np.random.default_rng(5))
    assert torch.equal(a, b) and a.shape == (3, 16, 16) and a.dtype == torch.uint8
    assert not torch.equal(a, crop(img, np.random.default_rng(6)))
    whole = TrainCrop((40, 60), scale=None, hflip=0.0)(img, np.random.default_rng(0))
    assert torch.equal(whole, to_tensor(img))  # no crop, same size: the image itself
