"""``coco:PATH`` on a small folder written here in COCO's JSON layout, with PNG and JPEG images;
imperfect annotations are skipped, clipped or refused as the loader documents, and counted."""

import json
import logging

import numpy as np
import pytest
import torch
from PIL import Image

from vitpos.data.catalog import open_data
from vitpos.data.coco import read_coco_annotations
from vitpos.errors import VitposError

CATEGORIES = [{"id": 3, "name": "cat", "supercategory": "animal"}, {"id": 18, "name": "dog", "supercategory": "animal"}]


def write_image(path, size, box=None, suffix="png"):
    """A black (H, W) image with the corner box (x, y, w, h) painted white."""
    h, w = size
    pixels = np.zeros((h, w, 3), dtype=np.uint8)
    if box is not None:
        x, y, bw, bh = box
        pixels[y : y + bh, x : x + bw] = 255
    Image.fromarray(pixels).save(path, format="PNG" if suffix == "png" else "JPEG", quality=95)


def write_split(root, name, images, annotations, categories=CATEGORIES):
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / name).mkdir(exist_ok=True)
    data = {
        "info": {"description": "test"},
        "licenses": [],
        "images": [{"id": i, "file_name": f, "height": h, "width": w} for i, f, h, w in images],
        "annotations": [
            {
                "id": k,
                "image_id": i,
                "category_id": c,
                "bbox": list(b),
                "area": b[2] * b[3],
                "iscrowd": crowd,
                "segmentation": [],
            }
            for k, (i, c, b, crowd) in enumerate(annotations, start=1)
        ],
        "categories": categories,
    }
    file = root / "annotations" / f"instances_{name}.json"
    file.write_text(json.dumps(data))
    return file


@pytest.fixture
def coco(tmp_path):
    root = tmp_path / "coco"
    write_split(root, "train2017", [(1, "a.png", 40, 60), (2, "b.jpg", 30, 30)],
                [(1, 3, (10, 5, 20, 10), 0), (1, 18, (0, 0, 6, 6), 0), (2, 18, (3, 3, 12, 9), 0)])  # fmt: skip
    write_image(root / "train2017" / "a.png", (40, 60), (10, 5, 20, 10))
    write_image(root / "train2017" / "b.jpg", (30, 30), (3, 3, 12, 9), suffix="jpg")
    write_split(root, "val2017", [(7, "c.png", 32, 32)], [(7, 3, (8, 8, 16, 16), 0)])
    write_image(root / "val2017" / "c.png", (32, 32), (8, 8, 16, 16))
    return root


def test_loads_images_boxes_and_labels(coco):
    data = open_data(f"coco:{coco}")
    info = data.info
    assert info.task == "detection" and info.classes == ("cat", "dog") and info.num_outputs == 2
    train = data.train.for_evaluation().at_size(40)  # shorter side 40: a.png stays 40 x 60, b.jpg 30 -> 40
    images, padded = train[torch.tensor([0, 1])]
    assert images.shape == (2, 3, 40, 60) and images.dtype == torch.uint8
    assert padded.padding_mask[0].sum() == 0 and padded.padding_mask[1, :, 40:].all()
    assert not padded.padding_mask[1, :, :40].any() and images[1, :, :, 40:].max() == 0
    assert padded.sizes.tolist() == [[40, 60], [30, 30]]  # the original sizes
    targets = padded.targets
    rows = targets[0][targets[0, :, 0] >= 0]
    # category 3 -> label 0, 18 -> label 1; boxes normalised (cx, cy, w, h)
    torch.testing.assert_close(
        rows, torch.tensor([[0, 20 / 60, 10 / 40, 20 / 60, 10 / 40], [1, 3 / 60, 3 / 40, 6 / 60, 6 / 40]])
    )
    # the box covers the painted pixels of the PNG, resized
    x0, y0, x1, y1 = 10, 5, 30, 15
    assert images[0, :, y0:y1, x0:x1].float().mean() > 250 and images[0, :, y1 + 2 :, :].float().max() < 5
    assert len(data.val) == len(data.test) == 1


def test_resizing_keeps_normalised_boxes_on_the_object(coco):
    train = open_data(f"coco:{coco}").train.for_evaluation().at_size((64, 64))
    images, padded = train[torch.tensor([1])]  # the JPEG, 30 x 30 -> 64 x 64
    assert images.shape == (1, 3, 64, 64)
    _, cx, cy, w, h = padded.targets[0, 0].tolist()
    x0, y0, x1, y1 = (
        round((cx - w / 2) * 64),
        round((cy - h / 2) * 64),
        round((cx + w / 2) * 64),
        round((cy + h / 2) * 64),
    )
    assert images[0, :, y0 + 1 : y1 - 1, x0 + 1 : x1 - 1].float().mean() > 240
    assert images[0, :, y1 + 2 :, :].float().max() < 20


def test_imperfect_annotations_are_skipped_clipped_and_counted(tmp_path, caplog):
    root = tmp_path / "coco"
    file = write_split(root, "train", [(1, "a.png", 20, 20), (2, "gone.png", 20, 20), (3, "empty.png", 20, 20)], [
        (1, 3, (15, 15, 10, 10), 0),  # reaches outside: clipped to (15, 15, 5, 5)
        (1, 3, (4, 4, 0, 6), 0),  # zero width: left out
        (1, 18, (2, 2, 4, 4), 1),  # crowd: left out
        (2, 3, (1, 1, 5, 5), 0),  # its image file is missing: the image is skipped
    ])  # fmt: skip
    write_image(root / "train" / "a.png", (20, 20))
    write_image(root / "train" / "empty.png", (20, 20))
    with caplog.at_level(logging.WARNING, logger="vitpos.data"):
        files, objects, _names, counts, sizes = read_coco_annotations(file, root / "train")
    assert [f.name for f in files] == ["a.png", "empty.png"] and sizes == [(20, 20), (20, 20)]
    assert counts == {
        "missing image files (skipped)": 1, "boxes outside the image (clipped)": 1, "boxes of zero size (left out)": 1,
        "crowd annotations (left out)": 1, "images without objects (kept)": 1,
    }  # fmt: skip
    torch.testing.assert_close(objects[0].boxes, torch.tensor([[17.5 / 20, 17.5 / 20, 5 / 20, 5 / 20]]))
    assert len(objects[1].labels) == 0
    assert "1 missing image files (skipped)" in caplog.text and "1 boxes of zero size (left out)" in caplog.text


def test_unknown_category_is_an_error_naming_file_annotation_and_id(tmp_path):
    root = tmp_path / "coco"
    file = write_split(root, "train", [(1, "a.png", 20, 20)], [(1, 99, (1, 1, 5, 5), 0)])
    write_image(root / "train" / "a.png", (20, 20))
    with pytest.raises(
        VitposError,
        match=r"instances_train.json: annotation 1 has category_id 99, which is not among the categories \(3, 18\)",
    ):
        read_coco_annotations(file, root / "train")


def test_val_categories_must_be_the_training_ones(coco):
    write_split(
        coco,
        "val2017",
        [(7, "c.png", 32, 32)],
        [(7, 5, (8, 8, 16, 16), 0)],
        categories=[*CATEGORIES, {"id": 5, "name": "cow"}],
    )
    with pytest.raises(VitposError, match="category_id 5"):
        open_data(f"coco:{coco}")


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda root: (root / "annotations" / "instances_val2017.json").unlink(),
            r"needs one annotations/instances_val\*.json, found no file",
        ),
        (
            lambda root: (root / "annotations" / "instances_train2017.json").write_text("[1, 2]"),
            "is not a COCO annotation file",
        ),
        (lambda root: [p.unlink() for p in (root / "train2017").iterdir()], "none of its 2 images was found"),
        (
            lambda root: (root / "annotations" / "instances_train2017.json").write_text(
                json.dumps({"images": [], "annotations": [], "categories": []})
            ),
            "lists no categories",
        ),
    ],
)
def test_broken_folders_say_what_is_wrong(coco, change, message):
    change(coco)
    with pytest.raises((VitposError, FileNotFoundError), match=message):
        open_data(f"coco:{coco}")


def test_a_missing_folder_or_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_data(f"coco:{tmp_path / 'nowhere'}")
    with pytest.raises(ValueError, match="needs a path"):
        open_data("coco:")
