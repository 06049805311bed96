"""COCO-format detection data: ``coco:PATH`` with ``PATH/annotations/instances_<split>*.json``.

``PATH`` holds ``annotations/instances_train*.json`` and ``annotations/instances_val*.json``
(e.g. COCO 2017's ``instances_train2017.json``) and, for each, its images in ``PATH/<name>/``
where ``<name>`` is the file name after ``instances_`` (``train2017/``), or in ``PATH/images/``.
The test split is the val split (COCO's test annotations are not public). Annotations are read
with ``pycocotools``; categories become labels 0..C-1 in the order of their ids.

Images are decoded with Pillow when a batch is drawn and resized to the model's size without
cropping (boxes are normalised, so they stay exact; the aspect ratio is not kept, unlike DETR's
resizing with padding). What the loader does with imperfect annotations, each counted in the
log (``vitpos.data``):

* an image whose file is missing: skipped;
* an image without annotations: kept (every query learns "no object"), counted;
* a crowd annotation (``iscrowd=1``): left out of the targets, as DETR does;
* a box reaching outside its image: clipped to the image;
* a box of zero width or height (after clipping): left out;
* an annotation whose ``category_id`` is not among the file's categories, or whose image id is
  not among its images: an error naming the file, the annotation and the id.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from pycocotools.coco import COCO  # type: ignore[import-untyped]  # no stubs declared for pycocotools yet

from ..errors import VitposError
from .coco_checks import check_coco_entries
from .dataset import DataInfo, DataSplits, ImageDataset, Size, as_size
from .folders import IMAGENET_MEAN, IMAGENET_STD
from .objects import ObjectTargets, pad_objects

__all__ = ["load_coco_splits", "read_coco_annotations", "CocoImages"]

LOG = logging.getLogger("vitpos.data")


class CocoImages(ImageDataset):
    """Image files with their objects; :meth:`at_size` must set the size before batches are drawn."""

    def __init__(self, files: list[Path], targets: torch.Tensor, info: DataInfo, size: Size | None = None) -> None:
        super().__init__(info, size)
        self.files = files
        self.targets = targets

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.image_size is None:
            raise RuntimeError("COCO images have no common size; call at_size(size) first")
        images = torch.stack([decode_resized(self.files[i], self.image_size) for i in index.tolist()])
        return images, self.targets[index]

    def at_size(self, size: int | tuple[int, int]) -> CocoImages:
        return CocoImages(self.files, self.targets, self.info, as_size(size))


def decode_resized(path: Path, size: Size) -> torch.Tensor:
    """RGB uint8 (3, H, W), the whole image resized to ``size`` (no crop: boxes stay inside)."""
    try:
        with Image.open(path) as img:
            pixels = np.asarray(
                img.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR), dtype=np.uint8
            )
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise VitposError(f"cannot read image {path} ({err}); remove or replace the file") from None
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)


def _load_index(file: Path) -> COCO:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return COCO(str(file))
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        raise VitposError(
            f"{file} is not a COCO annotation file ({type(err).__name__}: {err}); "
            "expected keys images, annotations, categories"
        ) from None


def read_coco_annotations(
    file: Path, image_dir: Path, categories: list[int] | None = None
) -> tuple[list[Path], list[ObjectTargets], dict[int, str], Counter]:
    """Image paths, their objects (labels by ``categories`` order), category names and skip counts."""
    coco = _load_index(file)
    check_coco_entries(file, coco.dataset)
    names = {c["id"]: c.get("name", str(c["id"])) for c in coco.dataset.get("categories", [])}
    if not names:
        raise VitposError(f"{file} lists no categories; add a 'categories' list of {{'id', 'name'}}")
    order = sorted(names) if categories is None else categories
    label_of = {cid: i for i, cid in enumerate(order)}
    for ann in coco.dataset.get("annotations", []):
        if ann["category_id"] not in label_of:
            raise VitposError(
                f"{file}: annotation {ann.get('id')} has category_id {ann['category_id']}, which is not among the "
                f"categories ({', '.join(map(str, order))}); fix the annotation or add the category"
            )
        if ann["image_id"] not in coco.imgs:
            raise VitposError(
                f"{file}: annotation {ann.get('id')} refers to image_id {ann['image_id']}, "
                "which is not among the images"
            )
    counts: Counter = Counter()
    files, objects = [], []
    for image_id in sorted(coco.imgs):
        meta = coco.imgs[image_id]
        path = image_dir / meta["file_name"]
        if not path.is_file():
            counts["missing image files (skipped)"] += 1
            continue
        w, h = float(meta["width"]), float(meta["height"])
        labels, boxes = [], []
        for ann in coco.imgToAnns.get(image_id, []):
            if ann.get("iscrowd", 0):
                counts["crowd annotations (left out)"] += 1
                continue
            x, y, bw, bh = map(float, ann["bbox"])
            x0, y0, x1, y1 = max(x, 0.0), max(y, 0.0), min(x + bw, w), min(y + bh, h)
            if (x0, y0, x1, y1) != (x, y, x + bw, y + bh):
                counts["boxes outside the image (clipped)"] += 1
            if x1 <= x0 or y1 <= y0:
                counts["boxes of zero size (left out)"] += 1
                continue
            labels.append(label_of[ann["category_id"]])
            boxes.append([(x0 + x1) / 2 / w, (y0 + y1) / 2 / h, (x1 - x0) / w, (y1 - y0) / h])
        if not labels:
            counts["images without objects (kept)"] += 1
        objects.append(
            ObjectTargets(
                torch.tensor(labels, dtype=torch.int64), torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4)
            )
        )
        files.append(path)
    if not files:
        raise VitposError(
            f"{file}: none of its {len(coco.imgs)} images was found in {image_dir}; check the image folder"
        )
    for what, n in sorted(counts.items()):
        LOG.warning("%s: %d %s", file.name, n, what)
    return files, objects, {cid: names[cid] for cid in order if cid in names}, counts


def _annotation_file(root: Path, split: str) -> Path:
    found = sorted((root / "annotations").glob(f"instances_{split}*.json"))
    if len(found) != 1:
        what = "no file" if not found else f"{len(found)} files ({', '.join(p.name for p in found)})"
        raise VitposError(f"coco:{root} needs one annotations/instances_{split}*.json, found {what}")
    return found[0]


def _image_dir(root: Path, annotations: Path) -> Path:
    named = root / annotations.stem.removeprefix("instances_")
    return named if named.is_dir() else root / "images"


def load_coco_splits(path: str | Path) -> DataSplits:
    """Train / val / test (= val) splits of the COCO-format folder ``path`` (see the module docstring)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"COCO folder {root} does not exist (or is not a folder)")
    train_file, val_file = _annotation_file(root, "train"), _annotation_file(root, "val")
    train_files, train_objects, names, _ = read_coco_annotations(train_file, _image_dir(root, train_file))
    val_files, val_objects, _, _ = read_coco_annotations(val_file, _image_dir(root, val_file), list(names))
    info = DataInfo(
        f"coco:{path}",
        "detection",
        classes=tuple(names.values()),
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        position_sensitive=True,
    )
    slots = max([len(o.labels) for o in train_objects + val_objects] + [1])
    train = CocoImages(train_files, pad_objects(train_objects, slots), info)
    val = CocoImages(val_files, pad_objects(val_objects, slots), info)
    return DataSplits(train, val, val)
