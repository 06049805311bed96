"""COCO AP from pycocotools: 100 on perfect predictions, far less on shuffled boxes."""

import pytest
import torch

from vitpos.data.synthetic_detect import SyntheticDetection
from vitpos.tasks.detection import Detections, box_cxcywh_to_xyxy, unpad_objects
from vitpos.tasks.detection.coco_eval import coco_metrics


def ground_truth(n=40, size=(64, 80)):
    split = SyntheticDetection(img_size=size, vary=0, objects=4, test=n).render("test")
    return unpad_objects(split[torch.arange(n)][1].targets), [size] * n


def as_detections(objects, size, scores=None):
    h, w = size
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    return [
        Detections(
            torch.ones(len(o.labels)) if scores is None else scores[i], o.labels, box_cxcywh_to_xyxy(o.boxes) * scale
        )
        for i, o in enumerate(objects)
    ]


def test_perfect_predictions_give_ap_100():
    targets, sizes = ground_truth()
    metrics = coco_metrics(targets, as_detections(targets, sizes[0]), sizes, num_classes=4)
    assert (
        metrics["AP"] == pytest.approx(100.0)
        and metrics["AP50"] == pytest.approx(100.0)
        and metrics["AP75"] == pytest.approx(100.0)
    )
    assert metrics["APs"] == pytest.approx(100.0)
    assert "APl" not in metrics  # no object above 96^2 pixels: COCOeval has no AP for that size


def test_shuffled_boxes_give_far_less():
    targets, sizes = ground_truth()
    g = torch.Generator().manual_seed(0)
    boxes = torch.cat([o.boxes for o in targets])
    shuffled = boxes[torch.randperm(len(boxes), generator=g)].split([len(o.labels) for o in targets])
    moved = [type(o)(o.labels, b) for o, b in zip(targets, shuffled, strict=True)]
    metrics = coco_metrics(targets, as_detections(moved, sizes[0]), sizes, num_classes=4)
    assert metrics["AP"] < 10.0


def test_wrong_classes_and_low_scores_cost_ap():
    targets, sizes = ground_truth()
    relabelled = [type(o)((o.labels + 1) % 4, o.boxes) for o in targets]
    assert coco_metrics(targets, as_detections(relabelled, sizes[0]), sizes, num_classes=4)["AP"] == 0.0
    # one extra false positive per image scored above the true boxes: precision falls, AP drops below 100
    h, w = sizes[0]
    noisy = [
        Detections(
            torch.cat([d.scores, torch.tensor([2.0])]),
            torch.cat([d.labels, d.labels[:1]]),
            torch.cat([d.boxes, torch.tensor([[0.0, 0.0, 3.0, 3.0]])]),
        )
        for d in as_detections(targets, (h, w))
    ]
    assert 50.0 < coco_metrics(targets, noisy, sizes, num_classes=4)["AP"] < 100.0


def test_counts_must_agree():
    targets, sizes = ground_truth(n=3)
    with pytest.raises(ValueError, match="one of each per image"):
        coco_metrics(targets, as_detections(targets, sizes[0])[:2], sizes, num_classes=4)
