"""Cosine-similarity maps of position encodings (thesis Fig. 5; LaPE Eq. 10 and Fig. 4).

The map of a reference cell is the cosine similarity between its encoding and the encoding
of every other cell, laid out on the grid. Per-layer maps come from
:func:`vitpos.analysis.tables.layer_position_encodings`, so a join that hands each layer its
own normalised PE (LaPE) shows one map per layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..grid import Grid

__all__ = ["default_references", "parse_references", "similarity_maps", "locality"]


def default_references(grid: Grid) -> list[tuple[int, int]]:
    """A corner, an edge cell and the centre: (row, column) cells that show the usual patterns."""
    h, w = grid
    cells = [(0, 0), (h // 2, 0), (h // 2, w // 2)]
    return list(dict.fromkeys(cells))


def parse_references(text: str, grid: Grid) -> list[tuple[int, int]]:
    """``"r,c;r,c"`` -> cells, checked against ``grid``."""
    cells = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        try:
            row, col = (int(v) for v in part.split(","))
        except ValueError:
            raise ValueError(f"reference {part!r} must look like 'row,col', e.g. '3,4'") from None
        cells.append((row, col))
    check_references(cells, grid)
    return cells


def check_references(cells: list[tuple[int, int]], grid: Grid) -> None:
    """Raise if a cell lies outside ``grid``."""
    h, w = grid
    for row, col in cells:
        if not (0 <= row < h and 0 <= col < w):
            raise ValueError(f"reference cell ({row}, {col}) is outside the {h}x{w} grid")


def similarity_maps(table: torch.Tensor, grid: Grid, references: list[tuple[int, int]]) -> torch.Tensor:
    """(R, H, W): cosine similarity of each reference cell's encoding with every cell's."""
    h, w = grid
    if table.ndim != 2 or table.shape[0] != h * w:
        raise ValueError(f"expected a ({h * w}, D) table for grid {h}x{w}, got shape {tuple(table.shape)}")
    check_references(references, grid)
    unit = F.normalize(table.double(), dim=-1)
    rows = torch.tensor([r * w + c for r, c in references], dtype=torch.long)
    return (unit[rows] @ unit.t()).reshape(len(references), h, w).float()


def locality(table: torch.Tensor, grid: Grid) -> float:
    """Mean cosine similarity of 4-neighbours minus that of all pairs of distinct cells.

    Positive when nearby cells have more similar encodings than cells in general (a
    relative-location bias); about 0 for a random table. In [-2, 2]. Memory is O(H*W*D): the mean
    over all pairs comes from the sum of the unit vectors, never from the N x N similarity matrix.
    """
    h, w = grid
    if h * w < 2:
        raise ValueError("a 1x1 grid has no neighbouring cells")
    unit = F.normalize(table.double(), dim=-1)
    n = h * w
    # sum over i != j of u_i . u_j is |sum u|^2 minus the n self-similarities: no N x N matrix
    all_pairs = (unit.sum(dim=0).square().sum() - unit.square().sum()) / (n * (n - 1))
    cells = unit.reshape(h, w, -1)
    right = (cells[:, :-1] * cells[:, 1:]).sum(dim=-1).reshape(-1)
    below = (cells[:-1, :] * cells[1:, :]).sum(dim=-1).reshape(-1)
    return float(torch.cat([right, below]).mean() - all_pairs)
