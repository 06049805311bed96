"""COCO-format detection data: ``coco:PATH`` with ``PATH/annotations/instances_<split>*.json``.

``PATH`` holds ``annotations/instances_train*.json`` and ``annotations/instances_val*.json``
(e.g. COCO 2017's ``instances_train2017.json``) and, for each, its images in ``PATH/<name>/``
where ``<name>`` is the file name after ``instances_`` (``train2017/``), or in ``PATH/images/``.
The test split is the val split (COCO's test annotations are not public). Annotations are read
with ``pycocotools``; categories become labels 0..C-1 in the order of their ids.

Images are decoded with Pillow when a batch is drawn, at their own size, and transformed as DETR
does (:mod:`.dense_transforms`: aspect-preserving multi-scale resizes, random crops and flips in
training, shorter side 800 / longer <= 1333 in evaluation; a model trained at another size scales
every size by ``size / 800``), then padded per batch with a padding mask (:mod:`.padded`). The
original size of every image travels with the batch: COCO AP is computed there. What the loader
does with imperfect annotations, each counted in the log (``vitpos.data``):

* an image whose file is missing: skipped;
* an image without annotations: kept (every query learns "no object"), counted;
* a crowd annotation (``iscrowd=1``): left out of the targets, as DETR does;
* a box reaching outside its image: clipped to the image;
* a box of zero width or height (after clipping): left out;
* an annotation whose ``category_id`` is not among the file's categories, or whose image id is
  not among its images: an error naming the file, the annotation and the id;
* two images or categories with one id, or a ``file_name`` leaving the image folder: an error
  (:mod:`.coco_checks`); an image file whose size is not the entry's ``width`` and ``height``:
  an error naming both when it is decoded.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import VitposError
from .coco_checks import check_coco_entries
from .dataset import DataInfo, DataSplits, Size
from .decode import READ_ERRORS, open_image, to_tensor, unreadable
from .dense_transforms import DenseRecipe, DenseSample
from .folders import IMAGENET_MEAN, IMAGENET_STD
from .objects import ObjectTargets
from .padded import PaddedImages

if TYPE_CHECKING:
    from pycocotools.coco import COCO  # type: ignore[import-untyped]  # no stubs declared for pycocotools yet

__all__ = ["load_coco_splits", "read_coco_annotations", "coco_images", "decode_image"]

LOG = logging.getLogger("vitpos.data")


def coco_images(
    files: list[Path],
    objects: list[ObjectTargets],
    sizes: list[Size],
    info: DataInfo,
    slots: int,
    train: bool,
    annotations: Path | None = None,
) -> PaddedImages:
    """A split of image files decoded at their own size, transformed by DETR's recipe (:meth:`PaddedImages.at_size`
    scales it) and padded per batch; its ``sizes`` (H, W) are the annotations' original sizes, which each file
    must have (the boxes are normalised by them)."""

    def load(i: int) -> DenseSample:
        pixels = decode_image(files[i])
        if tuple(pixels.shape[1:]) != sizes[i]:
            h, w = sizes[i]
            raise VitposError(
                f"{annotations or 'the annotations'}: image {files[i].name} is {pixels.shape[2]}x{pixels.shape[1]} "
                f"pixels, but its entry gives width {w}, height {h}, by which its boxes are normalised; correct the "
                "entry's width and height (or the file)"
            )
        return DenseSample.from_normalised(pixels, objects[i].labels, objects[i].boxes)

    return PaddedImages(load, sizes, info, (800, 800), recipe=DenseRecipe(), train=train, slots=slots)


def decode_image(path: Path) -> torch.Tensor:
    """RGB uint8 (3, H, W) at the file's own size."""
    img = open_image(path)
    try:
        return to_tensor(img.convert("RGB"))
    except READ_ERRORS as err:
        raise unreadable(path, err) from None


def _load_index(file: Path) -> COCO:
    from pycocotools.coco import COCO  # imported when a COCO folder is read: the rest of vitpos runs without it

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
) -> tuple[list[Path], list[ObjectTargets], dict[int, str], Counter, list[Size]]:
    """Image paths, their objects (labels by ``categories`` order), category names, skip counts and the
    images' (H, W) as the annotations give them."""
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
    files, objects, sizes = [], [], []
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
        sizes.append((int(h), int(w)))
    if not files:
        raise VitposError(
            f"{file}: none of its {len(coco.imgs)} images was found in {image_dir}; check the image folder"
        )
    for what, n in sorted(counts.items()):
        LOG.warning("%s: %d %s", file.name, n, what)
    return files, objects, {cid: names[cid] for cid in order if cid in names}, counts, sizes


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
    train_files, train_objects, names, _, train_sizes = read_coco_annotations(train_file, _image_dir(root, train_file))
    val_files, val_objects, _, _, val_sizes = read_coco_annotations(val_file, _image_dir(root, val_file), list(names))
    info = DataInfo(
        f"coco:{path}",
        "detection",
        classes=tuple(names.values()),
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        position_sensitive=True,
    )
    slots = max([len(o.labels) for o in train_objects + val_objects] + [1])
    train = coco_images(train_files, train_objects, train_sizes, info, slots, train=True, annotations=train_file)
    val = coco_images(val_files, val_objects, val_sizes, info, slots, train=False, annotations=val_file)
    return DataSplits(train, val, val, test_name="val")
