"""Anchors (sizes, ratios, layout against the head's outputs), the box coding's round trip, the assigner."""

from __future__ import annotations

import math

import pytest
import torch

from vitpos.tasks.detection.boxes import box_xyxy_to_cxcywh
from vitpos.tasks.retinanet import assign_anchors, cell_anchors, decode_boxes, encode_boxes, grid_anchors
from vitpos.tasks.retinanet.anchors import RETINANET_RATIOS, RETINANET_SCALES
from vitpos.tasks.retinanet.assigner import BACKGROUND, IGNORED
from vitpos.tasks.retinanet.box_coding import MAX_LOG_SCALE


def test_cell_anchors_have_the_papers_areas_and_ratios() -> None:
    cell = cell_anchors(32.0, RETINANET_SCALES, RETINANET_RATIOS)
    cx, cy, w, h = box_xyxy_to_cxcywh(cell).unbind(-1)
    assert cell.shape == (9, 4) and bool((cx.abs() < 1e-12).all() and (cy.abs() < 1e-12).all())
    for r, ratio in enumerate(RETINANET_RATIOS):  # ratio-major, then scale
        for s, scale in enumerate(RETINANET_SCALES):
            k = 3 * r + s
            assert math.isclose(float(w[k] * h[k]), (32 * scale) ** 2, rel_tol=1e-9)
            assert math.isclose(float(h[k] / w[k]), ratio, rel_tol=1e-9)


@pytest.mark.parametrize("grid", [(3, 5), (4, 1), (2, 2)])
def test_grid_anchors_are_cell_major_at_stride_offsets(grid: tuple[int, int]) -> None:
    cell = cell_anchors(16.0, RETINANET_SCALES, RETINANET_RATIOS)
    anchors = grid_anchors(cell, grid, 8).view(grid[0], grid[1], 9, 4)
    for y in range(grid[0]):
        for x in range(grid[1]):
            torch.testing.assert_close(anchors[y, x], cell + torch.tensor([x * 8.0, y * 8.0] * 2, dtype=cell.dtype))


def test_encode_then_decode_gives_the_boxes_back() -> None:
    g = torch.Generator().manual_seed(0)
    anchors = torch.rand(200, 2, generator=g, dtype=torch.float64) * 100
    anchors = torch.cat([anchors, anchors + 5 + torch.rand(200, 2, generator=g, dtype=torch.float64) * 50], 1)
    boxes = torch.rand(200, 2, generator=g, dtype=torch.float64) * 100
    boxes = torch.cat([boxes, boxes + 5 + torch.rand(200, 2, generator=g, dtype=torch.float64) * 80], 1)
    for stds in [(1.0, 1.0, 1.0, 1.0), (0.1, 0.1, 0.2, 0.2)]:
        deltas = encode_boxes(anchors, boxes, stds)
        torch.testing.assert_close(decode_boxes(anchors, deltas, stds), boxes)
    same = encode_boxes(anchors, anchors)
    torch.testing.assert_close(same, torch.zeros_like(same))


def test_decoding_clamps_the_size_deltas() -> None:
    anchor = torch.tensor([[0.0, 0.0, 10.0, 20.0]])
    box = decode_boxes(anchor, torch.tensor([[0.0, 0.0, 50.0, 50.0]]))
    w, h = float(box[0, 2] - box[0, 0]), float(box[0, 3] - box[0, 1])
    assert math.isclose(w, 10 * math.exp(MAX_LOG_SCALE), rel_tol=1e-5) and math.isclose(h, 20 * w / 10, rel_tol=1e-5)


def test_assigner_thresholds_and_low_quality_matches() -> None:
    anchors = torch.tensor([
        [0.0, 0, 10, 10],  # IoU 1 with object 0: positive
        [0.0, 0, 10, 15],  # IoU 2/3 with object 0: positive
        [0.0, 0, 10, 22],  # IoU 0.45 with object 0: ignored
        [50.0, 50, 60, 60],  # overlaps nothing: background
        [100.0, 100, 120, 120],  # IoU 0.25 with object 1, its best: positive (low-quality match)
    ])  # fmt: skip
    objects = torch.tensor([[0.0, 0, 10, 10], [100.0, 100, 110, 110]])
    assigned = assign_anchors(anchors, objects)
    assert assigned.tolist() == [0, 0, IGNORED, BACKGROUND, 1]
    assert assign_anchors(anchors, objects[:0]).tolist() == [BACKGROUND] * 5
