"""The red-green segmentation tasks: masks match the painted squares at any size."""

from __future__ import annotations

import pytest
import torch

from vitpos.data import open_data
from vitpos.data.synthetic_segment import SyntheticSegmentation


def _colour_classes(images: torch.Tensor) -> torch.Tensor:
    red = (images[:, 0] == 255) & (images[:, 1] == 0)
    green = (images[:, 1] == 255) & (images[:, 0] == 0)
    return red.long() + 2 * green.long()


@pytest.mark.parametrize("size", [(32, 32), (24, 40), (48, 16)])
def test_segment_masks_are_the_square_colours(size: tuple[int, int]) -> None:
    split = SyntheticSegmentation(img_size=size, square_size=4, train=20).render("train")
    images, masks = split[torch.arange(20)]
    assert masks.shape == (20, *size) and masks.dtype == torch.int64
    assert torch.equal(masks, _colour_classes(images))
    assert ((masks == 1).sum((1, 2)) == 16).all() and ((masks == 2).sum((1, 2)) == 16).all()


def test_segment_absolute_labels_squares_by_image_half() -> None:
    split = SyntheticSegmentation(task="segment_absolute", img_size=(32, 24), square_size=4, train=50).render("train")
    images, masks = split[torch.arange(50)]
    colour = _colour_classes(images)
    rows = torch.arange(32).view(1, 32, 1).expand_as(masks)
    lower = rows >= 16  # aligned squares never straddle the middle at 32 rows
    expect = torch.where(colour == 0, 0, 2 * colour - 1 + lower.long())
    assert torch.equal(masks, expect)
    assert set(masks.unique().tolist()) == {0, 1, 2, 3, 4}


def test_at_size_draws_the_split_anew_and_spec_round_trips() -> None:
    data = open_data("synthetic:segment_absolute:img=32x48:train=8:val=4:test=4", patch_size=4)
    assert data.info.classes == ("background", "red_upper", "red_lower", "green_upper", "green_lower")
    again = open_data(data.info.spec)
    assert torch.equal(again.train[torch.arange(8)][1], data.train[torch.arange(8)][1])
    images, masks = data.test.at_size((64, 32))[torch.arange(4)]
    assert images.shape == (4, 3, 64, 32) and masks.shape == (4, 64, 32)
    assert ((masks > 0).sum((1, 2)) == 32).all()  # two 4x4 squares, drawn, not resized
