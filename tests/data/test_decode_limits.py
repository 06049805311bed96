"""The pixel limit on opened images, and worker errors that reach the main process as they were raised."""

import pytest
import torch
from PIL import Image

from vitpos.data.braces import brace_count, expand_braces, iter_braces
from vitpos.data.decode import open_image, pixel_limit
from vitpos.data.loader import worker_batches
from vitpos.errors import ConfigError, VitposError

from . import hostile_files as forge


def test_an_image_over_the_limit_is_refused_before_decoding(monkeypatch):
    monkeypatch.setenv("VITPOS_MAX_IMAGE_PIXELS", "1023")
    with pytest.raises(VitposError, match=r"image a\.png is 32x32 pixels, more than the limit of 1023 pixels"):
        open_image(forge.png(32, 32), "a.png")
    monkeypatch.setenv("VITPOS_MAX_IMAGE_PIXELS", "1024")
    with open_image(forge.png(32, 32), "a.png") as img:
        assert img.convert("RGB").getpixel((0, 0)) == (90, 165, 40)


def test_a_raised_limit_reaches_pillows_own_check(monkeypatch):
    monkeypatch.delenv("VITPOS_MAX_IMAGE_PIXELS", raising=False)
    with pytest.raises(VitposError, match=r"is 400000000 pixels, more than the limit of 89478485 pixels"):
        open_image(forge.bomb_png(), "bomb.png")
    monkeypatch.setenv("VITPOS_MAX_IMAGE_PIXELS", "400000000")
    with open_image(forge.bomb_png(), "bomb.png") as img:  # opened (not decoded): the size is all that is read
        assert img.size == (20000, 20000)
    monkeypatch.delenv("VITPOS_MAX_IMAGE_PIXELS")
    assert pixel_limit() == 89478485 and Image.MAX_IMAGE_PIXELS is not None


@pytest.mark.parametrize("value", ["0", "-5", "1e9", "lots"])
def test_a_bad_limit_is_refused(monkeypatch, value):
    monkeypatch.setenv("VITPOS_MAX_IMAGE_PIXELS", value)
    with pytest.raises(ConfigError, match=rf"VITPOS_MAX_IMAGE_PIXELS='{value}' is not allowed: give a whole number"):
        pixel_limit()


class _Items(torch.utils.data.Dataset):
    """Item i is a tensor [i]; item 2 raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise self.error
        return torch.tensor([i])


def test_a_workers_own_error_is_raised_as_it_was():
    got = []
    with pytest.raises(VitposError) as caught:
        for batch in worker_batches(_Items(VitposError("image x.png is bad; remove it")), 1, range(4)):
            got.append(int(batch))
    assert got == [0, 1] and str(caught.value) == "image x.png is bad; remove it"
    with pytest.raises(FileNotFoundError) as missing:
        list(worker_batches(_Items(FileNotFoundError("gone.png")), 1, range(4)))
    assert str(missing.value) == "gone.png"


def test_a_bug_in_a_worker_keeps_its_traceback():
    with pytest.raises(RuntimeError, match=r"Caught RuntimeError in DataLoader worker process 0"):
        list(worker_batches(_Items(RuntimeError("a bug")), 1, range(4)))


def test_brace_patterns_are_counted_without_listing_them():
    assert brace_count("s-{000000..999999999}.tar") == 10**9
    assert brace_count("{a,b,c}/s-{0..9}-{00..04}.tar") == 150
    names = iter_braces("s-{000000..999999999}.tar")
    assert [next(names) for _ in range(2)] == ["s-000000.tar", "s-000001.tar"]
    assert expand_braces("s-{08..10}.tar", limit=3) == ["s-08.tar", "s-09.tar", "s-10.tar"]
    with pytest.raises(VitposError, match=r"names 4 shards, more than the 3 vitpos opens"):
        expand_braces("s-{7..10}.tar", limit=3)
    with pytest.raises(VitposError, match=r"the range \{9\.\.3\} runs backwards"):
        brace_count("s-{9..3}.tar")
