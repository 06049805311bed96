"""Boxes stay on their objects through every detection transform: each object is painted into the
mask with its own id, and after a flip, crop, resize or a whole random recipe its box must be the
bounding box of its pixels (exactly for flips and crops, within the resampling for resizes)."""

import pytest
import torch

from vitpos.data.dense_transforms import (
    DETR_SCALES,
    DenseRecipe,
    DenseSample,
    crop,
    hflip,
    resize_sample,
    shorter_side_size,
)


def random_scene(seed: int) -> DenseSample:
    """An image of random size with up to 4 non-overlapping rectangles, ids 1..n in the mask and the image."""
    g = torch.Generator().manual_seed(seed)
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=g))  # noqa: E731
    h, w = draw(20, 70), draw(20, 70)
    mask = torch.zeros(h, w, dtype=torch.int64)
    boxes = []
    for _ in range(40):
        if len(boxes) == 4:
            break
        bh, bw = draw(4, h // 2), draw(4, w // 2)
        y, x = draw(0, h - bh), draw(0, w - bw)
        if mask[y : y + bh, x : x + bw].any():
            continue
        mask[y : y + bh, x : x + bw] = len(boxes) + 1
        boxes.append([x, y, x + bw, y + bh])
    image = (mask * 40).to(torch.uint8)[None].expand(3, h, w).clone()
    labels = torch.arange(1, len(boxes) + 1)
    return DenseSample(image, labels, torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), mask)


def pixel_boxes(sample: DenseSample) -> dict[int, list[float]]:
    """The bounding box (x0, y0, x1, y1) of every id's pixels in the mask, in continuous coordinates."""
    assert sample.mask is not None
    out = {}
    for label in sample.mask.unique().tolist():
        if label == 0:
            continue
        ys, xs = (sample.mask == label).nonzero(as_tuple=True)
        out[label] = [xs.min().item(), ys.min().item(), xs.max().item() + 1.0, ys.max().item() + 1.0]
    return out


def assert_boxes_on_pixels(sample: DenseSample, tolerance: float) -> None:
    """Every object with pixels has its box on them, every kept box has pixels, and the image is the mask's."""
    on_pixels = pixel_boxes(sample)
    kept = dict(zip(sample.labels.tolist(), sample.boxes.tolist(), strict=True))
    assert set(on_pixels) <= set(kept)
    for label, box in kept.items():
        if label in on_pixels:
            torch.testing.assert_close(torch.tensor(box), torch.tensor(on_pixels[label]), atol=tolerance, rtol=0)
        else:  # a sliver thinner than a pixel after resizing
            assert min(box[2] - box[0], box[3] - box[1]) < 1.0
    assert sample.image.shape[-2:] == sample.mask.shape
    assert sample.mask.dtype == torch.int64


@pytest.mark.parametrize("seed", range(12))
def test_flip_and_crop_move_boxes_exactly(seed):
    sample = random_scene(seed)
    assert_boxes_on_pixels(sample, 0.0)
    flipped = hflip(sample)
    assert_boxes_on_pixels(flipped, 0.0)
    torch.testing.assert_close(hflip(flipped).boxes, sample.boxes)
    g = torch.Generator().manual_seed(seed)
    h, w = sample.size
    ch, cw = int(torch.randint(1, h + 1, (), generator=g)), int(torch.randint(1, w + 1, (), generator=g))
    top, left = int(torch.randint(0, h - ch + 1, (), generator=g)), int(torch.randint(0, w - cw + 1, (), generator=g))
    cropped = crop(sample, top, left, ch, cw)
    assert cropped.size == (ch, cw)
    assert_boxes_on_pixels(cropped, 0.0)
    # an object is dropped exactly when none of it is inside the window
    assert set(cropped.labels.tolist()) == set(pixel_boxes(cropped))


@pytest.mark.parametrize("seed", range(12))
def test_resize_keeps_boxes_on_the_resampled_pixels(seed):
    sample = random_scene(seed)
    g = torch.Generator().manual_seed(100 + seed)
    size = (int(torch.randint(10, 120, (), generator=g)), int(torch.randint(10, 120, (), generator=g)))
    resized = resize_sample(sample, size)
    assert resized.size == size and resized.image.dtype == torch.uint8
    # nearest-neighbour masks move an edge by at most one output pixel
    assert_boxes_on_pixels(resized, 1.0)
    # normalised boxes do not change under a resize
    torch.testing.assert_close(resized.normalised_boxes(), sample.normalised_boxes())


@pytest.mark.parametrize("seed", range(16))
def test_detr_recipe_keeps_boxes_on_their_objects(seed):
    recipe = DenseRecipe.scaled(48)
    out = recipe.training(random_scene(seed), torch.Generator().manual_seed(seed))
    assert max(out.size) <= recipe.max_size
    # three resamplings, each moving an edge by at most one pixel of its output
    assert_boxes_on_pixels(out, 3.0)


def test_detr_recipe_draws_both_branches_and_flips():
    recipe = DenseRecipe.scaled(48)
    scene = random_scene(0)
    sizes, flips = set(), 0
    for seed in range(40):
        out = recipe.training(scene, torch.Generator().manual_seed(seed))
        sizes.add(out.size)
        flips += bool(out.boxes.numel()) and out.boxes[0, 0] != scene.boxes[0, 0] * out.size[1] / scene.size[1]
    assert len(sizes) > 5 and 0 < flips < 40


def test_shorter_side_size_is_detrs():
    assert shorter_side_size((480, 640), 800, 1333) == (800, 1066)
    assert shorter_side_size((640, 480), 800, 1333) == (1066, 800)
    assert shorter_side_size((600, 1600), 800, 1333) == (500, 1333)  # the longer side caps the shorter
    assert shorter_side_size((800, 1000), 800, 1333) == (800, 1000)  # already there
    assert shorter_side_size((30, 45), 32) == (32, 48)


def test_scaled_recipe_and_evaluation_size():
    recipe = DenseRecipe.scaled(32)
    assert recipe.scales == tuple(round(s * 32 / 800) for s in DETR_SCALES) and recipe.scales[-1] == 32
    assert recipe.max_size == 53 and recipe.crop_range == (15, 24) and recipe.crop_prescales == (16, 20, 24)
    scene = random_scene(3)  # 36 x 70: the longer side caps the shorter at round(53 * 36 / 70) = 27
    assert scene.size == (36, 70) and recipe.evaluation(scene).size == (27, 52)
    assert recipe.evaluation(random_scene(0)).size == shorter_side_size(random_scene(0).size, 32, 53)
    assert DenseRecipe().scales == DETR_SCALES and DenseRecipe().max_size == 1333


def test_a_crop_outside_the_image_is_refused():
    with pytest.raises(ValueError, match="does not fit in a"):
        crop(random_scene(0), 0, 0, 500, 5)
