"""RetinaNet's anchors (Lin et al., ICCV 2017, §4): 3 scales x 3 aspect ratios at every cell of every level.

On level l (stride s = 2**l pixels) the anchors have areas (4 s)^2 scaled by 2^0, 2^(1/3) and
2^(2/3), each at height/width ratios 1:2, 1:1 and 2:1, so 9 anchors cover 32-813 pixels over
P3-P7. They are centred on the cells' top-left pixels (x = i s, y = j s: mmdet's and
Detectron2's offset 0) and ordered cell-major, then ratio, then scale (mmdet's order), which is
the order of the head's outputs.
"""

from __future__ import annotations

import math

import torch

__all__ = ["cell_anchors", "grid_anchors", "RETINANET_SCALES", "RETINANET_RATIOS"]

RETINANET_SCALES = (1.0, 2 ** (1 / 3), 2 ** (2 / 3))
"""Octave scales of the base size (the paper's 2^0, 2^(1/3), 2^(2/3))."""
RETINANET_RATIOS = (0.5, 1.0, 2.0)
"""Height / width ratios (the paper's 1:2, 1:1, 2:1)."""


def cell_anchors(base_size: float, scales: tuple[float, ...], ratios: tuple[float, ...]) -> torch.Tensor:  # A, 4
    """The anchors of one cell centred on (0, 0), corners (x0, y0, x1, y1): ratio-major, then scale."""
    out = []
    for ratio in ratios:
        for scale in scales:
            w = base_size * scale / math.sqrt(ratio)
            h = base_size * scale * math.sqrt(ratio)
            out.append([-w / 2, -h / 2, w / 2, h / 2])
    return torch.tensor(out, dtype=torch.float64)


def grid_anchors(cell: torch.Tensor, grid: tuple[int, int], stride: float) -> torch.Tensor:  # H*W*A, 4
    """``cell`` anchors (A, 4) shifted to every cell of a ``grid`` (H, W) of ``stride`` pixels, cell-major."""
    h, w = grid
    ys = torch.arange(h, dtype=cell.dtype, device=cell.device) * stride
    xs = torch.arange(w, dtype=cell.dtype, device=cell.device) * stride
    y, x = torch.meshgrid(ys, xs, indexing="ij")
    shifts = torch.stack([x, y, x, y], dim=-1).reshape(-1, 1, 4)
    return (shifts + cell[None]).reshape(-1, 4)
