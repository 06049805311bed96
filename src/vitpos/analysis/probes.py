"""Linear probes for relative location in a position table (thesis §4.1, Table 2).

For every ordered pair of cells (i, j) the feature is x_i - x_j. A logistic regression
predicts whether cell i lies right of cell j (left/right) and, separately, below it
(up/down); a linear regression predicts the offset (dx, dy) = p_i - p_j. Scores come from
10-fold cross-validation.

The thesis does not say what the folds split. Folding the *pairs* lets a probe memorise
cells: a random table whose width reaches the number of cells is a unique linear code per cell,
so every pair relation is linearly decodable from it and a freshly initialised learned table
scores far above chance — contrary to the thesis's ~50% / R² ~0. We therefore fold the
*cells* (``split="cells"``, default): the probe is fitted on pairs of training cells and
scored on pairs of held-out cells, so it measures relative-location structure that carries
over to cells it never saw — the "bias" the thesis asks about. ``split="pairs"`` is the
literal alternative. Pairs in the same column (row) have no left/right (up/down) label and
are left out of that probe. Features are standardised so the probe does not depend on the
scale of the table. Scores are pooled over the out-of-fold predictions of all folds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterator

import numpy as np
import torch
from sklearn.metrics import r2_score

from ..grid import Grid, grid_coords
from .fitting import linear_classifier, linear_regressor, single_threaded

__all__ = ["ProbeResult", "pair_features", "probe_table", "SPLITS"]

SPLITS = ("cells", "pairs")


@dataclass(frozen=True)
class ProbeResult:
    """Cross-validated probe scores of one position table."""

    left_right: float
    """Accuracy of the left/right logistic regression, in [0, 1]; chance is 0.5."""
    up_down: float
    """Accuracy of the up/down logistic regression, in [0, 1]; chance is 0.5."""
    distance_r2: float
    """R² of the (dx, dy) linear regression (mean over the two outputs); 1 is perfect, 0 is the mean."""
    test_pairs: int
    """Number of out-of-fold pairs the scores are computed on."""

    def to_dict(self) -> dict[str, float]:
        """Plain dict, for JSON."""
        return asdict(self)


def pair_features(table: torch.Tensor, grid: Grid) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All ordered pairs i != j: features x_i - x_j (P, D), offsets (P, 2) as (dx, dy), and i, j."""
    h, w = grid
    n = h * w
    if table.ndim != 2 or table.shape[0] != n:
        raise ValueError(f"expected a ({n}, D) table for grid {h}x{w}, got shape {tuple(table.shape)}")
    x = table.detach().double().cpu().numpy()
    coords = grid_coords(grid, dtype=torch.float64).numpy()  # (x, y) = (column, row)
    first, second = np.nonzero(~np.eye(n, dtype=bool))
    return x[first] - x[second], coords[first] - coords[second], first, second


def _folds(split: str, folds: int, first: np.ndarray, second: np.ndarray, n: int, rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(train mask, test mask) per fold."""
    if split == "cells":
        cell_fold = rng.permutation(n) % folds
        for k in range(folds):
            held_i, held_j = cell_fold[first] == k, cell_fold[second] == k
            yield ~held_i & ~held_j, held_i & held_j
    else:
        pair_fold = rng.permutation(len(first)) % folds
        for k in range(folds):
            yield pair_fold != k, pair_fold == k


def _subsample(mask: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Keep at most ``limit`` of the True entries of ``mask``, chosen at random."""
    index = np.flatnonzero(mask)
    if len(index) <= limit:
        return index
    return rng.choice(index, size=limit, replace=False)


def probe_table(
    table: torch.Tensor,
    grid: Grid,
    *,
    folds: int = 10,
    split: str = "cells",
    max_train_pairs: int = 6000,
    seed: int = 0,
) -> ProbeResult:
    """Cross-validated left/right, up/down and (dx, dy) probes on a (H*W, D) position table.

    With ``split="cells"`` the number of folds is lowered on small grids so each fold holds
    at least three cells. ``max_train_pairs`` caps the pairs each fold is fitted on (large
    grids have ~N² pairs); the cap is drawn at random with ``seed``.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown probe split {split!r}; valid values: {', '.join(SPLITS)}")
    n = grid[0] * grid[1]
    if n < 6:
        raise ValueError(f"grid {grid[0]}x{grid[1]} is too small to probe; use at least 6 cells")
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    if split == "cells":
        folds = min(folds, n // 3)
    features, offsets, first, second = pair_features(table, grid)
    targets = {"left_right": offsets[:, 0], "up_down": offsets[:, 1]}
    rng = np.random.default_rng(seed)
    predicted = {name: np.zeros(len(features), dtype=bool) for name in targets}
    predicted_offsets = np.zeros_like(offsets)
    tested = np.zeros(len(features), dtype=bool)
    with single_threaded():
        for train, test in _folds(split, folds, first, second, n, rng):
            if not test.any():
                continue
            tested |= test
            for name, delta in targets.items():
                rows = _subsample(train & (delta != 0), max_train_pairs, rng)
                labels = delta[rows] > 0
                if labels.all() or not labels.any():  # one class only: predict it
                    predicted[name][test] = labels[0]
                    continue
                predicted[name][test] = linear_classifier().fit(features[rows], labels).predict(features[test])
            rows = _subsample(train, max_train_pairs, rng)
            predicted_offsets[test] = linear_regressor().fit(features[rows], offsets[rows]).predict(features[test])
    scores = {}
    for name, delta in targets.items():
        scored = tested & (delta != 0)
        scores[name] = float(np.mean(predicted[name][scored] == (delta[scored] > 0)))
    r2 = float(r2_score(offsets[tested], predicted_offsets[tested]))
    return ProbeResult(scores["left_right"], scores["up_down"], r2, int(tested.sum()))
