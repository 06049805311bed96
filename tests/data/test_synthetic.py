"""The red-green tasks: determinism, labels that match the pixels at every size, colour shift."""

import numpy as np
import pytest
import torch

from vitpos.data.synthetic import SHIFTED_COLOURS, TASKS, TRAIN_COLOURS, SyntheticTask


def square_corners(image: torch.Tensor, colour) -> list[tuple[int, int]]:
    """Top-left (x, y) of every pixel block painted exactly ``colour``."""
    mask = (image == torch.tensor(colour, dtype=torch.uint8).view(3, 1, 1)).all(0)
    ys, xs = torch.nonzero(mask, as_tuple=True)
    return [(int(xs.min()), int(ys.min()))] if len(xs) else []


def expected_label(task: str, red, green, height: int, side: int):
    (rx, ry), (gx, gy) = red, green
    if task == "direction":
        return int(gx > rx)
    if task == "direction4":
        return 2 * int(gy > ry) + int(gx > rx)
    if task == "distance":
        return [(rx - gx) / side, (ry - gy) / side]
    assert (ry + side <= height / 2 and gy + side <= height / 2) or (ry >= height / 2 and gy >= height / 2)
    return int(ry >= height / 2)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("size", [32, 48, (16, 40)])
def test_labels_match_the_pixels_at_every_size(task, size):
    side = 4
    split = SyntheticTask(task, square_size=side, train=64).render("train", size)
    h, w = split.image_size
    assert split.images.shape == (64, 3, h, w) and split.images.dtype == torch.uint8
    for image, target in zip(split.images, split.targets, strict=True):
        red, green = square_corners(image, TRAIN_COLOURS[0]), square_corners(image, TRAIN_COLOURS[1])
        assert len(red) == len(green) == 1
        # one square each, one patch wide, on the patch lattice, nothing else painted
        assert int((image > 0).any(0).sum()) == 2 * side * side
        assert all(v % side == 0 for v in red[0] + green[0])
        label = expected_label(task, red[0], green[0], h, side)
        assert target.tolist() == label


def test_same_seed_same_data_other_seed_other_data():
    a, b = SyntheticTask("direction4", train=50).render("train"), SyntheticTask("direction4", train=50).render("train")
    assert torch.equal(a.images, b.images) and torch.equal(a.targets, b.targets)
    c = SyntheticTask("direction4", train=50, seed=1).render("train")
    assert not torch.equal(a.images, c.images)
    test = SyntheticTask("direction4", test=50).render("test")
    assert not torch.equal(a.images, test.images)


def test_default_splits_follow_the_thesis():
    task = SyntheticTask()
    assert (task.img_size, task.train, task.val, task.test) == (32, 5000, 1000, 1000)
    splits = task.splits()
    assert (len(splits.train), len(splits.val), len(splits.test)) == (5000, 1000, 1000)
    assert 0.45 < splits.train.targets.float().mean() < 0.55  # both directions about equally often


def test_colour_shift_paints_the_test_split_only():
    splits = SyntheticTask("absolute_colorshift", train=40, val=40, test=40).splits()
    for split, colours in ((splits.train, TRAIN_COLOURS), (splits.val, TRAIN_COLOURS), (splits.test, SHIFTED_COLOURS)):
        seen = {tuple(p) for p in split.images.permute(0, 2, 3, 1).reshape(-1, 3).tolist()} - {(0, 0, 0)}
        assert seen == set(colours)
    assert not set(SHIFTED_COLOURS) & set(TRAIN_COLOURS)
    plain = SyntheticTask("absolute", test=40).render("test")
    assert torch.equal(plain.targets, splits.test.targets)  # same scenes, other colours


def test_free_placement_leaves_the_lattice_but_never_overlaps():
    split = SyntheticTask("distance", square_size=4, train=200, aligned=False).render("train")
    corners = []
    for image in split.images:
        red, green = square_corners(image, TRAIN_COLOURS[0]), square_corners(image, TRAIN_COLOURS[1])
        assert int((image > 0).any(0).sum()) == 32  # two whole squares: no overlap
        corners += [*red, *green]
    assert any(x % 4 or y % 4 for x, y in corners)
    assert not np.allclose(split.targets.numpy(), split.targets.numpy().round())


def test_at_size_redraws_with_same_square_size():
    split = SyntheticTask("distance", square_size=4, test=300).render("test")
    bigger = split.at_size(64)
    assert bigger.image_size == (64, 64) and bigger.split == "test"
    assert split.targets.abs().max() <= 7 < bigger.targets.abs().max() <= 15  # offsets in squares, wider range
    assert bigger.at_size(64) is bigger


def test_bad_options_are_clear():
    with pytest.raises(ValueError, match=r"task = .left. .*expected one of direction, direction4"):
        SyntheticTask("left")
    with pytest.raises(ValueError, match="no room for two 8-pixel squares"):
        SyntheticTask("direction", img_size=12, square_size=8)


def test_a_whole_split_is_its_stored_tensors_or_their_resized_batch():
    split = SyntheticTask("direction", img_size=16, square_size=4, train=12, val=4, test=4, seed=3).splits().train
    images, targets = split.whole()
    assert images is split.images and targets is split.targets  # only read: nothing copied
    resized, same = split.at_size(24).whole()
    expected = split.at_size(24)[torch.arange(12)]
    assert resized.shape == (12, 3, 24, 24) and torch.equal(resized, expected[0]) and torch.equal(same, expected[1])
