"""Box conversions and generalised IoU against hand-computed cases."""

import pytest
import torch

from vitpos.tasks.detection import box_cxcywh_to_xyxy, box_iou, box_xyxy_to_cxcywh, generalized_box_iou


def test_conversions_by_hand_and_round_trip():
    cxcywh = torch.tensor([[0.5, 0.5, 0.2, 0.4], [10.0, 20.0, 4.0, 6.0]])
    xyxy = torch.tensor([[0.4, 0.3, 0.6, 0.7], [8.0, 17.0, 12.0, 23.0]])
    torch.testing.assert_close(box_cxcywh_to_xyxy(cxcywh), xyxy)
    torch.testing.assert_close(box_xyxy_to_cxcywh(xyxy), cxcywh)
    boxes = torch.rand(3, 5, 4)
    torch.testing.assert_close(box_xyxy_to_cxcywh(box_cxcywh_to_xyxy(boxes)), boxes)


@pytest.mark.parametrize(
    "a, b, iou, giou",
    [
        ([0, 0, 2, 2], [0, 0, 2, 2], 1.0, 1.0),  # identical
        ([0, 0, 2, 2], [1, 1, 3, 3], 1 / 7, 1 / 7 - 2 / 9),  # overlap 1, union 7, hull 9
        ([0, 0, 1, 1], [2, 0, 3, 1], 0.0, -1 / 3),  # apart: union 2, hull 3
        ([0, 0, 1, 1], [1, 0, 2, 1], 0.0, 0.0),  # touching: hull = union
        ([0, 0, 4, 4], [1, 1, 2, 2], 1 / 16, 1 / 16),  # nested: hull = the larger box
        ([0, 0, 1, 1], [10, 10, 11, 11], 0.0, 2 / 121 - 1),  # far apart: towards -1
    ],
)
def test_iou_and_giou_by_hand(a, b, iou, giou):
    a, b = torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64)
    assert box_iou(a, b)[0].item() == pytest.approx(iou)
    assert generalized_box_iou(a, b).item() == pytest.approx(giou)
    assert generalized_box_iou(b, a).item() == pytest.approx(giou)


def test_giou_is_pairwise():
    a, b = box_cxcywh_to_xyxy(torch.rand(4, 4) * 0.5 + 0.1), box_cxcywh_to_xyxy(torch.rand(3, 4) * 0.5 + 0.1)
    full = generalized_box_iou(a, b)
    assert full.shape == (4, 3)
    for i in range(4):
        for j in range(3):
            assert full[i, j] == generalized_box_iou(a[i : i + 1], b[j : j + 1])[0, 0]


def test_degenerate_boxes_are_refused():
    with pytest.raises(ValueError, match="x1 < x0"):
        generalized_box_iou(torch.tensor([[1.0, 0, 0, 1]]), torch.tensor([[0.0, 0, 1, 1]]))
