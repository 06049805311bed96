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
    split = SyntheticSegmentation(img_size=size, square_size=4, vary=0, train=20).render("train")
    images, padded = split[torch.arange(20)]
    masks = padded.targets
    assert masks.shape == (20, *size) and masks.dtype == torch.int64
    assert torch.equal(masks, _colour_classes(images))
    assert ((masks == 1).sum((1, 2)) == 16).all() and ((masks == 2).sum((1, 2)) == 16).all()


def test_segment_absolute_labels_squares_by_image_half() -> None:
    split = SyntheticSegmentation(task="segment_absolute", img_size=(32, 24), square_size=4, vary=0, train=50)
    images, padded = split.render("train")[torch.arange(50)]
    masks = padded.targets
    colour = _colour_classes(images)
    rows = torch.arange(32).view(1, 32, 1).expand_as(masks)
    lower = rows >= 16  # aligned squares never straddle the middle at 32 rows
    expect = torch.where(colour == 0, 0, 2 * colour - 1 + lower.long())
    assert torch.equal(masks, expect)
    assert set(masks.unique().tolist()) == {0, 1, 2, 3, 4}


def test_at_size_draws_the_split_anew_and_spec_round_trips() -> None:
    data = open_data("synthetic:segment_absolute:img=32x48:vary=0.5:train=8:val=4:test=4", patch_size=4)
    assert data.info.classes == ("background", "red_upper", "red_lower", "green_upper", "green_lower")
    assert data.info.spec == "synthetic:segment_absolute:vary=0.5:img=32x48:square=4:train=8:val=4:test=4"
    again = open_data(data.info.spec)
    assert torch.equal(again.train[torch.arange(8)][1].targets, data.train[torch.arange(8)][1].targets)
    images, padded = data.test.at_size((64, 32))[torch.arange(4)]
    masks = padded.targets
    assert images.shape[0] == 4 and images.shape[-2:] == masks.shape[-2:] and max(masks.shape[-2:]) <= 64
    assert (((masks > 0) & (masks < 255)).sum((1, 2)) == 32).all()  # two 4x4 squares, drawn, not resized


@pytest.mark.parametrize("task", ["segment", "segment_absolute"])
def test_images_of_varied_sizes_label_their_padding_ignore(task: str) -> None:
    split = SyntheticSegmentation(task=task, img_size=(32, 40), square_size=4, vary=0.5, train=40).render("train")
    images, padded = split[torch.arange(40)]
    sizes = padded.valid_sizes.tolist()
    assert sizes == padded.sizes.tolist() and len({tuple(s) for s in sizes}) > 5
    assert all(16 <= h <= 32 and 20 <= w <= 40 and h % 4 == 0 and w % 4 == 0 for h, w in sizes)
    masks = padded.targets
    assert torch.equal(masks == 255, padded.padding_mask)
    for image, mask, (h, w) in zip(images, masks, sizes, strict=True):
        colour = _colour_classes(image[None, :, :h, :w])[0]
        expect = colour.clone()
        if task == "segment_absolute":  # each square by the half of the image's own height its centre is in
            for c in (1, 2):
                top = (colour == c).nonzero()[:, 0].min()
                expect[colour == c] = 2 * c - 1 + int(top + 2 >= h / 2)
        assert torch.equal(mask[:h, :w], expect)
        assert ((colour == 1).sum(), (colour == 2).sum()) == (16, 16)


def test_vary_is_a_segmentation_option_only() -> None:
    with pytest.raises(ValueError, match="vary= sets the image sizes of segmentation tasks"):
        open_data("synthetic:direction:vary=0.5")
    with pytest.raises(ValueError, match="no room for two"):
        SyntheticSegmentation(img_size=16, square_size=4, vary=0.75)
