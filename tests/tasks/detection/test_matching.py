"""The Hungarian matcher against brute force, and its cost against DETR's formula written out."""

import itertools

import pytest
import torch

from vitpos.tasks.detection import HungarianMatcher, ObjectTargets, box_cxcywh_to_xyxy, generalized_box_iou
from vitpos.tasks.detection.matching import assign


def brute_force(cost: torch.Tensor) -> float:
    """The least total cost of assigning every column to a distinct row."""
    n, m = cost.shape
    return min(sum(cost[r, c].item() for c, r in enumerate(rows)) for rows in itertools.permutations(range(n), m))


@pytest.mark.parametrize("seed", range(20))
def test_assignment_is_the_brute_force_optimum(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 7, (1,), generator=g))
    m = int(torch.randint(1, n + 1, (1,), generator=g))
    cost = torch.randn(n, m, generator=g, dtype=torch.float64)
    rows, cols = assign(cost)
    assert len(rows) == m and len(set(rows.tolist())) == m and sorted(cols.tolist()) == list(range(m))
    assert cost[rows, cols].sum().item() == pytest.approx(brute_force(cost))


def test_cost_is_detrs_formula():
    torch.manual_seed(1)
    logits, boxes = torch.randn(6, 4), torch.rand(6, 4) * 0.4 + 0.2
    target = ObjectTargets(torch.tensor([2, 0, 2]), torch.rand(3, 4) * 0.4 + 0.2)
    matcher = HungarianMatcher(cost_class=1.5, cost_bbox=5.0, cost_giou=2.0)
    cost = matcher.costs(logits, boxes, target)
    prob = logits.softmax(-1)
    for i in range(6):
        for j in range(3):
            l1 = (boxes[i] - target.boxes[j]).abs().sum()
            giou = generalized_box_iou(
                box_cxcywh_to_xyxy(boxes[i : i + 1]), box_cxcywh_to_xyxy(target.boxes[j : j + 1])
            )[0, 0]
            expected = -1.5 * prob[i, target.labels[j]] + 5.0 * l1 - 2.0 * giou
            assert cost[i, j].item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-6)


def test_matcher_finds_the_planted_queries_and_handles_empty_images():
    boxes = torch.tensor([[0.2, 0.2, 0.1, 0.1], [0.7, 0.7, 0.2, 0.2], [0.5, 0.3, 0.1, 0.3]])
    logits = torch.full((2, 5, 3), -5.0)
    pred = torch.rand(2, 5, 4) * 0.1 + 0.45
    pred[0, 3], pred[0, 1], pred[0, 4] = boxes
    logits[0, 3, 0] = logits[0, 1, 1] = logits[0, 4, 0] = 5.0
    targets = [
        ObjectTargets(torch.tensor([0, 1, 0]), boxes),
        ObjectTargets(torch.empty(0, dtype=torch.int64), torch.empty(0, 4)),
    ]
    (rows, cols), (empty_rows, empty_cols) = HungarianMatcher()(logits, pred, targets)
    assert dict(zip(cols.tolist(), rows.tolist(), strict=True)) == {0: 3, 1: 1, 2: 4}
    assert len(empty_rows) == len(empty_cols) == 0


def test_non_finite_costs_are_refused():
    with pytest.raises(ValueError, match="inf or nan"):
        assign(torch.tensor([[0.0, float("nan")], [1.0, 2.0]]))
