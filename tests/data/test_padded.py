"""Padded batches: images of different sizes padded bottom/right to a multiple of the stride, with
a mask that is True exactly on padding, targets in each image's own coordinates, original sizes kept."""

import pytest
import torch

from vitpos.data.dataset import DataInfo
from vitpos.data.dense_transforms import DenseRecipe, DenseSample, shorter_side_size
from vitpos.data.masks import IGNORE_INDEX
from vitpos.data.padded import (
    PaddedImages,
    PaddedTargets,
    collate_padded,
    model_inputs,
    padded_size,
    plain_targets,
)

SIZES = [(5, 7), (9, 3), (4, 4)]


def sample(h: int, w: int, seed: int, with_mask: bool = False) -> DenseSample:
    g = torch.Generator().manual_seed(seed)
    image = torch.randint(1, 256, (3, h, w), generator=g, dtype=torch.uint8)  # no zero pixel: padding shows
    boxes = torch.tensor([[0.0, 0.0, w / 2, h], [1.0, 1.0, w, h]])
    mask = torch.randint(0, 4, (h, w), generator=g) if with_mask else None
    return DenseSample(image, torch.tensor([2, 0]), boxes, mask)


@pytest.mark.parametrize("stride", [1, 4, 8])
def test_detection_collate_pads_with_a_mask_of_exactly_the_padding(stride):
    samples = [sample(h, w, i) for i, (h, w) in enumerate(SIZES)]
    originals = [(50, 70), (90, 30), (40, 41)]
    images, padded = collate_padded(samples, originals, stride, slots=3)
    ph, pw = padded_size(SIZES, stride)
    assert (ph, pw) == (-(-9 // stride) * stride, -(-7 // stride) * stride)
    assert images.shape == (3, 3, ph, pw) and padded.padding_mask.shape == (3, ph, pw)
    for i, ((h, w), s) in enumerate(zip(SIZES, samples, strict=True)):
        assert torch.equal(images[i, :, :h, :w], s.image)
        expected = torch.ones(ph, pw, dtype=torch.bool)
        expected[:h, :w] = False
        assert torch.equal(padded.padding_mask[i], expected)
        assert images[i][:, expected].sum() == 0
        # boxes normalised by the image's own size, not the padded one
        rows = padded.targets[i]
        torch.testing.assert_close(
            rows[:2, 1:],
            torch.tensor([[0.25, 0.5, 0.5, 1.0], [(1 + w) / 2 / w, (1 + h) / 2 / h, (w - 1) / w, (h - 1) / h]]),
        )
        assert rows[:2, 0].tolist() == [2, 0] and rows[2, 0] == -1
    assert padded.sizes.tolist() == [list(o) for o in originals]
    assert padded.valid_sizes.tolist() == [list(s) for s in SIZES]


def test_segmentation_collate_ignores_padding():
    samples = [sample(h, w, i, with_mask=True) for i, (h, w) in enumerate(SIZES)]
    _, padded = collate_padded(samples, SIZES, stride=4)
    for i, ((h, w), s) in enumerate(zip(SIZES, samples, strict=True)):
        assert torch.equal(padded.targets[i, :h, :w], s.mask)
        assert (padded.targets[i][padded.padding_mask[i]] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="some samples have masks"):
        collate_padded([samples[0], sample(4, 4, 9)], SIZES[:2])


def test_model_inputs_zero_the_padding_and_pass_the_mask():
    images, padded = collate_padded([sample(h, w, i) for i, (h, w) in enumerate(SIZES)], SIZES, 4)
    x = torch.randn(images.shape)
    y, kwargs = model_inputs(x, padded)
    assert torch.equal(kwargs["padding_mask"], padded.padding_mask)
    assert (y[padded.padding_mask[:, None].expand_as(y)] == 0).all()
    assert torch.equal(y[~padded.padding_mask[:, None].expand_as(y)], x[~padded.padding_mask[:, None].expand_as(x)])
    assert plain_targets(padded) is padded.targets
    plain = torch.zeros(3)
    assert model_inputs(x, plain) == (x, {}) and plain_targets(plain) is plain


def test_targets_move_as_one():
    _, padded = collate_padded([sample(4, 6, 0)], [(4, 6)])
    moved = padded.to("cpu")
    assert isinstance(moved, PaddedTargets) and len(moved) == 1 and torch.equal(moved.sizes, padded.sizes)


def split(train: bool) -> PaddedImages:
    scenes = [sample(20 + 3 * i, 30 - 2 * i, i) for i in range(6)]
    info = DataInfo("test", "detection", classes=("a", "b", "c"))
    return PaddedImages(
        scenes.__getitem__, [s.size for s in scenes], info, (16, 16), recipe=DenseRecipe.scaled(16), train=train
    ).padded_to(8)


def test_training_batches_are_a_function_of_their_indices():
    train = split(train=True)
    first, again = train[torch.tensor([0, 3, 5])], train[torch.tensor([0, 3, 5])]
    assert torch.equal(first[0], again[0]) and torch.equal(first[1].targets, again[1].targets)
    other = train[torch.tensor([0, 3, 4])]
    assert not torch.equal(first[1].targets[:2], other[1].targets[:2]) or first[0].shape != other[0].shape
    assert first[0].shape[-2] % 8 == 0 and first[0].shape[-1] % 8 == 0


def test_evaluation_resizes_the_shorter_side_and_keeps_original_sizes():
    val = split(train=False)
    _, padded = val[torch.arange(6)]
    originals = [(20 + 3 * i, 30 - 2 * i) for i in range(6)]
    assert padded.sizes.tolist() == [list(s) for s in originals]
    assert padded.valid_sizes.tolist() == [list(shorter_side_size(s, 16, 27)) for s in originals]
    bigger = val.at_size(24)  # DETR's recipe scaled to 24: longer side <= round(1333 * 24 / 800) = 40
    assert bigger.stride == 8 and bigger.recipe == DenseRecipe.scaled(24)
    assert bigger[torch.arange(6)][1].valid_sizes.tolist() == [list(shorter_side_size(s, 24, 40)) for s in originals]


def test_analysis_inputs_from_varied_sizes_are_each_image_resized_to_the_model():
    import argparse

    from vitpos.commands.model_args import sample_images
    from vitpos.data.catalog import open_data
    from vitpos.models.factory import create_model

    host = create_model("pvt_tiny", img_size=64)
    spec = "synthetic:segment:img=64:square=8:test=5"
    x = sample_images(host, argparse.Namespace(images=5, data=spec, seed=0))
    images, padded = open_data(spec).test[torch.arange(5)]
    assert x.shape == (5, 3, 64, 64) and padded.valid_sizes.min() < 64  # some images were smaller
    # an image drawn at the model's size passes unchanged; a smaller one is stretched, its padding left out
    for i, (h, w) in enumerate(padded.valid_sizes.tolist()):
        red = x[i, 0] > 0
        assert red.any() and ((h, w) != (64, 64) or torch.equal(red, images[i, 0] == 255))
