"""Data specs and the digits set."""

import pytest
import torch

from vitpos.data import open_data
from vitpos.spec import SpecError


def test_synthetic_options_and_patch_wide_squares():
    splits = open_data("synthetic:direction4:img=24:train=30:val=10:test=20:seed=3", patch_size=8)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (30, 10, 20)
    assert splits.image_size == (24, 24) and splits.train.task.square_size == 8 and splits.train.task.seed == 3
    assert open_data("synthetic:distance:square=2:train=5:val=5:test=5").train.task.square_size == 2
    assert not open_data("synthetic:direction:free:train=5:val=5:test=5").train.task.aligned
    assert open_data("synthetic:distance:train=5:val=5:test=5").info.num_outputs == 2


@pytest.mark.parametrize(
    "spec,message",
    [
        ("imagenet:/data", "unknown data source 'imagenet'.*folder:PATH"),
        ("synthetic", "exactly one synthetic task"),
        ("synthetic:direction:distance", "exactly one synthetic task"),
        ("synthetic:direction:size=3", "unknown option 'size'; valid options: img, seed"),
        ("synthetic:direction:train=many", "option train='many' is invalid"),
        ("folder:", "needs a path"),
        ("digits:fast", "unknown flag 'fast'"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises((ValueError, SpecError), match=message):
        open_data(spec)


def test_digits_is_a_small_real_set():
    splits = open_data("digits")
    assert (len(splits.train), len(splits.val), len(splits.test)) == (1257, 270, 270)
    assert splits.image_size == (8, 8) and splits.info.channels == 1 and len(splits.info.classes) == 10
    assert splits.train.images.max() == 255
    bigger, _ = splits.train.at_size(16)[torch.arange(4)]  # resized batch by batch, stored copy untouched
    assert bigger.shape == (4, 1, 16, 16) and bigger.dtype == torch.uint8 and splits.train.images.shape[-1] == 8
    other = open_data("digits:seed=1")
    assert not (other.test.targets == splits.test.targets).all()


@pytest.mark.parametrize(
    "spec",
    [
        "synthetic:direction",
        "synthetic:distance:img=16x24:train=20:seed=2:free",
        "synthetic:absolute:square=8:val=7",
        "digits:seed=4",
    ],
)
def test_info_spec_reopens_the_same_data(spec):
    first = open_data(spec, patch_size=4)
    again = open_data(first.info.spec)  # no patch hint needed: the full spec says everything
    assert again.info == first.info
    for name in ("train", "test"):
        assert torch.equal(first.split(name).images, again.split(name).images)
