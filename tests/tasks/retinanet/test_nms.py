"""NMS against the greedy algorithm written out box by box."""

from __future__ import annotations

import pytest
import torch

from vitpos.tasks.detection.boxes import box_iou
from vitpos.tasks.retinanet import batched_nms, nms


def greedy_nms(boxes: torch.Tensor, scores: torch.Tensor, threshold: float) -> list[int]:
    """The textbook loop: take the best remaining box, drop all that overlap it by more than ``threshold``."""
    remaining = sorted(range(len(boxes)), key=lambda i: -float(scores[i]))
    keep = []
    while remaining:
        best = remaining.pop(0)
        keep.append(best)
        remaining = [i for i in remaining if float(box_iou(boxes[best : best + 1], boxes[i : i + 1])[0]) <= threshold]
    return keep


def random_boxes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * 80
    size = torch.rand(n, 2, generator=g) * 30 + 2
    return torch.cat([corner, corner + size], dim=1), torch.rand(n, generator=g)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7])
def test_nms_keeps_what_the_greedy_loop_keeps(seed: int, threshold: float) -> None:
    boxes, scores = random_boxes(120, seed)
    assert nms(boxes, scores, threshold).tolist() == greedy_nms(boxes, scores, threshold)


def test_a_chain_of_suppressions_is_resolved_in_order() -> None:
    """Box 1 is suppressed by box 0, so box 2 (overlapping only box 1) stays: one sweep is not enough."""
    boxes = torch.tensor([[0.0, 0, 10, 10], [3, 0, 13, 10], [6, 0, 16, 10], [9, 0, 19, 10]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
    assert nms(boxes, scores, 0.4).tolist() == greedy_nms(boxes, scores, 0.4) == [0, 2]


@pytest.mark.parametrize("seed", range(4))
def test_batched_nms_is_nms_within_each_label(seed: int) -> None:
    boxes, scores = random_boxes(150, seed)
    labels = torch.randint(0, 3, (150,), generator=torch.Generator().manual_seed(seed))
    expected = []
    for label in range(3):
        index = (labels == label).nonzero().squeeze(1)
        expected += [int(index[i]) for i in greedy_nms(boxes[index], scores[index], 0.5)]
    kept = batched_nms(boxes, scores, labels, 0.5)
    assert sorted(kept.tolist()) == sorted(expected)
    assert bool((scores[kept][:-1] >= scores[kept][1:]).all())  # by decreasing score
    assert batched_nms(boxes[:0], scores[:0], labels[:0], 0.5).tolist() == []


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"boxes \(N, 4\) and scores \(N,\)"):
        nms(torch.zeros(3, 4), torch.zeros(2), 0.5)
