"""Image folders with Pillow: both layouts, and a clear error for each kind of bad input."""

import numpy as np
import pytest
import torch
from PIL import Image

from vitpos.data import open_data
from vitpos.data.dataset import iterate_batches


def make_folder(root, classes=("cat", "dog"), per_class=5, size=(20, 12)):
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = np.full((size[1], size[0], 3), 40 * c + i, dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


def test_train_val_layout(tmp_path):
    make_folder(tmp_path / "train")
    make_folder(tmp_path / "val", per_class=2)
    splits = open_data(f"folder:{tmp_path}")
    assert splits.info.classes == ("cat", "dog") and splits.image_size is None
    assert (len(splits.train), len(splits.val), len(splits.test)) == (10, 4, 4)
    images, labels = splits.train.at_size(8)[torch.tensor([0, 9])]
    assert images.shape == (2, 3, 8, 8) and images.dtype == torch.uint8
    assert labels.tolist() == [0, 1] and images[1].unique().tolist() == [44]


def test_class_folders_are_split_deterministically(tmp_path):
    make_folder(tmp_path, per_class=10)
    a, b = open_data(f"folder:{tmp_path}"), open_data(f"folder:{tmp_path}")
    assert (len(a.train), len(a.val), len(a.test)) == (16, 2, 2)
    assert a.test.samples == b.test.samples
    assert not {p for p, _ in a.train.samples} & {p for p, _ in a.test.samples}


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"image folder .*nowhere does not exist"):
        open_data(f"folder:{tmp_path / 'nowhere'}")


def test_empty_class_folder(tmp_path):
    make_folder(tmp_path)
    (tmp_path / "bird").mkdir()
    (tmp_path / "bird" / "notes.txt").write_text("no images here")
    with pytest.raises(ValueError, match=r"class folder .*bird holds no images"):
        open_data(f"folder:{tmp_path}")


def test_unreadable_image_names_the_file(tmp_path):
    make_folder(tmp_path / "train")
    make_folder(tmp_path / "val", per_class=1)
    (tmp_path / "train" / "dog" / "broken.png").write_bytes(b"not a png at all")
    splits = open_data(f"folder:{tmp_path}").at_size(8)
    broken = next(i for i, (p, _) in enumerate(splits.train.samples) if p.name == "broken.png")
    with pytest.raises(ValueError, match=r"cannot read image .*broken\.png"):
        splits.train[torch.tensor([broken])]


def test_worker_processes_deliver_the_same_batches(tmp_path):
    make_folder(tmp_path / "train")
    make_folder(tmp_path / "val", per_class=1)
    train = open_data(f"folder:{tmp_path}").train.at_size(8)
    batches = list(torch.arange(10).split(4))
    direct = list(iterate_batches(train, batches))
    loaded = list(iterate_batches(train, batches, workers=1))
    assert len(loaded) == 3 and all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(direct, loaded, strict=True)
    )


def test_a_16_bit_image_reads_as_its_levels_not_clipped(tmp_path):
    """16-bit grey PNGs and TIFFs: each level v * 257 reads as v (Pillow alone would clip every level above 255)."""
    levels = (np.arange(64, dtype=np.uint16) * 4).reshape(8, 8)
    for split in ("train", "val"):
        for name in ("dark", "light"):
            (tmp_path / split / name).mkdir(parents=True)
            Image.fromarray(levels * 257).save(tmp_path / split / name / "a.png")
            Image.fromarray(levels * 257).save(tmp_path / split / name / "b.tif")
    data = open_data(f"folder:{tmp_path}").val.evaluated_with(1.0, "bicubic").at_size(8)
    images, _ = data[torch.arange(len(data))]
    expected = torch.from_numpy(levels.astype(np.uint8)).expand(3, 8, 8)
    assert len(images) == 4 and all(torch.equal(image, expected) for image in images)
