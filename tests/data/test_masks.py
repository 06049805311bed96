"""The mask-folder loader (ADE20K layout) on real PNG files written here, good and bad."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vitpos.data import open_data
from vitpos.data.masks import load_mask_splits, resize_masks

H, W = 12, 16


def _write(
    root: Path, split: str, name: str, mask: np.ndarray, image_hw: tuple[int, int] = (H, W), mode: str = "L"
) -> Path:
    (root / "images" / split).mkdir(parents=True, exist_ok=True)
    (root / "annotations" / split).mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(0).integers(0, 255, (*image_hw, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(root / "images" / split / f"{name}.jpg")
    path = root / "annotations" / split / f"{name}.png"
    img = Image.fromarray(mask.astype(np.uint8), mode="L")
    (img.convert("RGB") if mode == "RGB" else img).save(path)
    return path


def _mask(value: int = 1) -> np.ndarray:
    """Left half 0, right half ``value``, last row unlabelled (255)."""
    mask = np.zeros((H, W), np.uint8)
    mask[:, W // 2 :] = value
    mask[-1] = 255
    return mask


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for split in ("training", "validation"):
        for i in range(2):
            _write(tmp_path, split, f"img_{i}", _mask(2))
    return tmp_path


def test_loads_pairs_and_keeps_masks_aligned_at_another_size(folder: Path) -> None:
    data = open_data(f"masks:{folder}:classes=3")
    assert data.info.task == "segmentation" and data.info.num_outputs == 3
    assert len(data.train) == 2 and len(data.val) == 2 and data.test is data.val
    images, masks = data.train.at_size((H, W))[torch.arange(2)]
    assert images.shape == (2, 3, H, W) and images.dtype == torch.uint8
    assert masks.dtype == torch.int64 and masks[0].tolist() == _mask(2).tolist()
    _, big = data.train.at_size((2 * H, 2 * W))[torch.arange(1)]
    assert big[0].tolist() == resize_masks(torch.from_numpy(_mask(2))[None], (2 * H, 2 * W))[0].tolist()
    assert set(big.unique().tolist()) == {0, 2, 255}


def test_reduce_zero_maps_ade20k_ids(folder: Path) -> None:
    data = load_mask_splits(folder, classes=2, reduce_zero=True)
    _, masks = data.train.at_size((H, W))[torch.arange(1)]
    expect = np.where(_mask(2) == 0, 255, np.where(_mask(2) == 255, 255, _mask(2) - 1))
    assert masks[0].tolist() == expect.tolist()
    assert data.info.spec.endswith(":classes=2:reduce_zero")


def test_class_names_from_classes_txt(folder: Path) -> None:
    (folder / "classes.txt").write_text("wall\nsky\nroad\n")
    assert load_mask_splits(folder).info.classes == ("wall", "sky", "road")
    with pytest.raises(ValueError, match=r"classes=4 but .*classes\.txt names 3"):
        load_mask_splits(folder, classes=4)


def test_classes_txt_is_read_as_written(folder: Path) -> None:
    (folder / "classes.txt").write_text("wall\nsky\nroad")  # no final newline
    assert load_mask_splits(folder).info.classes == ("wall", "sky", "road")
    (folder / "classes.txt").write_text("wall\nsky\nwall\n")
    with pytest.raises(ValueError, match=r"classes\.txt: line 3 repeats 'wall' \(line 1\)"):
        load_mask_splits(folder)


def test_missing_class_count_is_explained(folder: Path) -> None:
    with pytest.raises(ValueError, match=r"no classes\.txt.*classes=N"):
        open_data(f"masks:{folder}")


def test_image_without_mask_names_the_file(folder: Path) -> None:
    (folder / "annotations" / "training" / "img_1.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"img_1\.jpg has no mask: expected .*annotations/training/img_1\.png"):
        load_mask_splits(folder, classes=3)


def test_mask_without_image_names_the_file(folder: Path) -> None:
    (folder / "images" / "validation" / "img_0.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=r"mask .*validation/img_0\.png has no image"):
        load_mask_splits(folder, classes=3)


def test_size_mismatch_names_the_mask_and_the_image(folder: Path) -> None:
    _write(folder, "training", "img_1", _mask(2), image_hw=(H + 2, W))
    data = load_mask_splits(folder, classes=3).train.at_size((H, W))
    with pytest.raises(ValueError, match=r"mask .*img_1\.png is 16x12 .* but its image .*img_1\.jpg is 16x14"):
        data[torch.arange(2)]


def test_class_ids_out_of_range_name_the_file(folder: Path) -> None:
    _write(folder, "training", "img_0", _mask(7))
    data = load_mask_splits(folder, classes=3).train.at_size((H, W))
    with pytest.raises(ValueError, match=r"mask .*training/img_0\.png holds class id\(s\) 7 outside the 3 classes"):
        data[torch.arange(1)]


def test_colour_masks_are_refused(folder: Path) -> None:
    _write(folder, "training", "img_0", _mask(1), mode="RGB")
    data = load_mask_splits(folder, classes=3).train.at_size((H, W))
    with pytest.raises(ValueError, match=r"mask .*img_0\.png has mode RGB; masks are single-channel"):
        data[torch.arange(1)]


def test_unreadable_mask_names_the_file(folder: Path) -> None:
    (folder / "annotations" / "training" / "img_0.png").write_bytes(b"not a png")
    data = load_mask_splits(folder, classes=3).train.at_size((H, W))
    with pytest.raises(ValueError, match=r"cannot read mask .*img_0\.png"):
        data[torch.arange(1)]


def test_missing_layout_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="needs images/ and annotations/"):
        load_mask_splits(tmp_path, classes=3)
