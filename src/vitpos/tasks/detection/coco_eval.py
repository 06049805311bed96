"""COCO's own detection metrics (``pycocotools.cocoeval.COCOeval``) on vitpos targets and predictions.

AP is averaged over IoU thresholds 0.50:0.05:0.95, AP50 and AP75 at one threshold, APs/APm/APl
over objects smaller than 32^2, between 32^2 and 96^2, and larger than 96^2 pixels; all in
percent, as papers quote them. A size class with no object in the ground truth has no AP
(COCOeval's -1) and is left out of the result.
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING

import numpy as np

from ...data.objects import ObjectTargets
from .postprocess import Detections

if TYPE_CHECKING:
    from pycocotools.coco import COCO  # type: ignore[import-untyped]  # pycocotools ships no type hints

__all__ = ["coco_metrics", "METRIC_NAMES", "coco_ground_truth", "coco_summary"]

METRIC_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl")
"""The first six numbers of ``COCOeval.stats``, in order."""


def coco_ground_truth(targets: list[ObjectTargets], sizes: list[tuple[int, int]], num_classes: int) -> COCO:
    """A COCO index of ``targets`` (normalised boxes) on images of ``sizes`` (H, W), ids from 1."""
    images: list[dict[str, object]] = []
    annotations: list[dict[str, object]] = []
    for image_id, (target, (h, w)) in enumerate(zip(targets, sizes, strict=True), start=1):
        images.append({"id": image_id, "height": h, "width": w})
        for label, (cx, cy, bw, bh) in zip(target.labels.tolist(), target.boxes.tolist(), strict=True):
            box = [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h]
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": int(label), "bbox": box,
                "area": box[2] * box[3], "iscrowd": 0,
            })  # fmt: skip
    from pycocotools.coco import COCO  # imported when AP is computed: the rest of vitpos runs without it

    coco = COCO()
    coco.dataset = {"images": images, "annotations": annotations, "categories": [{"id": c} for c in range(num_classes)]}
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def coco_metrics(
    targets: list[ObjectTargets], detections: list[Detections], sizes: list[tuple[int, int]], num_classes: int
) -> dict[str, float]:
    """AP, AP50, AP75, APs, APm, APl (percent) of ``detections`` (pixel corner boxes) against ``targets``."""
    if not (len(targets) == len(detections) == len(sizes)):
        raise ValueError(
            f"{len(targets)} targets, {len(detections)} detections and {len(sizes)} sizes: give one of each per image"
        )
    gt = coco_ground_truth(targets, sizes, num_classes)
    results = []
    for image_id, det in enumerate(detections, start=1):
        for score, label, (x0, y0, x1, y1) in zip(
            det.scores.tolist(), det.labels.tolist(), det.boxes.tolist(), strict=True
        ):
            results.append(
                {"image_id": image_id, "category_id": int(label), "bbox": [x0, y0, x1 - x0, y1 - y0], "score": score}
            )
    if not results or not gt.dataset["annotations"]:
        return {name: 0.0 for name in METRIC_NAMES[:3]}
    from pycocotools.cocoeval import COCOeval  # type: ignore[import-untyped]  # pycocotools ships no type hints

    with contextlib.redirect_stdout(io.StringIO()):
        evaluation = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    stats = np.asarray(evaluation.stats[: len(METRIC_NAMES)], dtype=np.float64)
    return {name: 100.0 * float(v) for name, v in zip(METRIC_NAMES, stats, strict=True) if v >= 0}


def coco_summary(metrics: dict[str, float]) -> str:
    """AP, AP50, AP75, APs, APm, APl on one line as DETR's evaluation reports them (``-`` where a size
    class has no object)."""
    return "  ".join(f"{name} {metrics[name]:.1f}" if name in metrics else f"{name} -" for name in METRIC_NAMES)
