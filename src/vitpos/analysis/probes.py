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
are left out of that probe. Scores are pooled over the out-of-fold predictions of all folds.

A grid of N cells has N(N - 1) ordered pairs (9.8 million on PVT's 56x56 first stage); above
``max_pairs`` (default 200,000) a uniform random sample of that many distinct pairs is drawn
(seeded) and the features are built for those pairs only, so memory stays bounded by
``max_pairs`` x D whatever the grid. :attr:`ProbeResult.pairs` says how many pairs were used.

The classifier is scikit-learn's logistic regression with its defaults (L2, C = 1) on the raw
differences, as the thesis uses it: the penalty is then relative to the scale of the table, so
a pattern too faint for the model to use (a fresh learned table has std 0.02) does not count,
and a fresh Fourier table scores about 90% as in the thesis's Table 2. For the offsets the
thesis names a linear regression; on held-out cells ordinary least squares fitted to a table
as wide as the grid has cells interpolates its training pairs and extrapolates wildly (R² of
about -10 for a random 64-wide table on 8x8 cells), which hides the "no information" reading.
By default (``regression="ridge"``) we therefore fit a ridge regression on standardised
differences whose penalty is chosen per fold and per output by an inner cross-validation over
the fold's own training cells (no held-out cell is seen), which scores about 0 without
information and 1 for a fixed sinusoidal table; ``regression="ols"`` is the plain linear
regression.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import torch
from sklearn.metrics import r2_score

from ..errors import ConfigError
from ..grid import Grid, grid_coords
from ..progress import progress
from .fitting import linear_classifier, ridge_predictions, single_threaded
from .stages import GridTooSmallError

__all__ = ["ProbeResult", "SCORES", "pair_features", "sample_pairs", "probe_table", "SPLITS", "REGRESSIONS"]

SPLITS = ("cells", "pairs")
REGRESSIONS = ("ridge", "ols")
RIDGE_PENALTIES = (1e-2, 1.0, 1e2, 1e4, 1e6)
"""Candidate ridge penalties (on standardised features, summed squared error)."""
INNER_FOLDS = 3
SCORES = ("left_right", "up_down", "distance_r2")
"""The fields of :class:`ProbeResult` that are scores (the others count pairs)."""
MAX_PAIRS = 200_000
"""Ordered pairs of cells a probe draws at most (a 56x56 grid has 9.8 million)."""


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
    pairs: int = 0
    """Number of ordered pairs drawn (all N(N - 1) of them, or ``max_pairs`` sampled at random)."""
    all_pairs: int = 0
    """Number of ordered pairs of the grid, N(N - 1)."""

    def to_dict(self) -> dict[str, float]:
        """Plain dict, for JSON."""
        return asdict(self)


def sample_pairs(n: int, limit: int | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Cells (i, j) of the ordered pairs i != j of ``n`` cells: all of them in row-major order, or
    ``limit`` distinct ones drawn uniformly (sorted) when there are more; never an N x N array."""
    total = n * (n - 1)
    flat = (
        np.arange(total) if limit is None or total <= limit else np.sort(rng.choice(total, size=limit, replace=False))
    )
    first, rest = np.divmod(flat, n - 1)
    return first, rest + (rest >= first)


def pair_features(
    table: torch.Tensor, grid: Grid, max_pairs: int | None = None, rng: np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ordered pairs i != j (all, or ``max_pairs`` drawn with ``rng``): features x_i - x_j (P, D),
    offsets (P, 2) as (dx, dy), and i, j."""
    h, w = grid
    n = h * w
    if table.ndim != 2 or table.shape[0] != n:
        raise ValueError(f"expected a ({n}, D) table for grid {h}x{w}, got shape {tuple(table.shape)}")
    x = table.detach().double().cpu().numpy()
    coords = grid_coords(grid, dtype=torch.float64).numpy()  # (x, y) = (column, row)
    first, second = sample_pairs(n, max_pairs, rng if rng is not None else np.random.default_rng(0))
    return x[first] - x[second], coords[first] - coords[second], first, second


def _folds(
    split: str, folds: int, within: np.ndarray, first: np.ndarray, second: np.ndarray, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(train mask, test mask) per fold over the pairs in ``within``.

    ``cells``: the cells these pairs touch are dealt into folds; a fold tests the pairs whose
    two cells are both held out and trains on the pairs whose cells are both kept.
    """
    if split == "cells":
        cells = np.unique(np.concatenate([first[within], second[within]]))
        cell_fold = np.full(int(max(first.max(), second.max())) + 1, -1)
        cell_fold[cells] = rng.permutation(len(cells)) % folds
        for k in range(folds):
            held_i, held_j = cell_fold[first] == k, cell_fold[second] == k
            yield (
                within & ~held_i & ~held_j & (cell_fold[first] >= 0) & (cell_fold[second] >= 0),
                within & held_i & held_j,
            )
    else:
        pair_fold = np.full(len(first), -1)
        pair_fold[within] = rng.permutation(int(within.sum())) % folds
        for k in range(folds):
            yield within & (pair_fold != k), within & (pair_fold == k)


def _subsample(mask: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Keep at most ``limit`` of the True entries of ``mask``, chosen at random."""
    index = np.flatnonzero(mask)
    if len(index) <= limit:
        return index
    return rng.choice(index, size=limit, replace=False)


def _ridge_penalties(
    split: str,
    train: np.ndarray,
    features: np.ndarray,
    offsets: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    limit: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Per output (dx, dy), the candidate penalty with the best pooled R² over inner folds of ``train``."""
    truth, guesses = [], []
    for fit, score in _folds(split, INNER_FOLDS, train, first, second, rng):
        if fit.any() and score.any():
            rows = _subsample(fit, limit, rng)
            guesses.append(ridge_predictions(features[rows], offsets[rows], features[score], RIDGE_PENALTIES))
            truth.append(offsets[score])
    if not truth:
        return np.full(offsets.shape[1], RIDGE_PENALTIES[0])
    truth_all, guess_all = np.concatenate(truth), np.concatenate(guesses, axis=1)
    scores = np.stack([r2_score(truth_all, g, multioutput="raw_values") for g in guess_all])  # penalties, outputs
    return np.asarray(RIDGE_PENALTIES)[scores.argmax(axis=0)]


def probe_table(
    table: torch.Tensor,
    grid: Grid,
    *,
    folds: int | None = None,
    split: str = "cells",
    regression: str = "ridge",
    max_train_pairs: int = 6000,
    max_pairs: int = MAX_PAIRS,
    seed: int = 0,
) -> ProbeResult:
    """Cross-validated left/right, up/down and (dx, dy) probes on a (H*W, D) position table.

    With ``split="cells"`` each fold holds out at least three cells, so a grid of N cells allows
    at most N // 3 folds; ``folds=None`` takes 10 (the thesis) or that maximum if lower, more
    than the maximum is an error. ``max_train_pairs`` caps the pairs each fold is fitted on (large
    grids have ~N² pairs); the cap is drawn at random with ``seed``. ``max_pairs`` bounds the pairs
    the features are built for at all (see the module's docstring).
    """
    if split not in SPLITS:
        raise ValueError(f"unknown probe split {split!r}; valid values: {', '.join(SPLITS)}")
    if regression not in REGRESSIONS:
        raise ValueError(f"unknown probe regression {regression!r}; valid values: {', '.join(REGRESSIONS)}")
    n = grid[0] * grid[1]
    if n < 6:
        raise GridTooSmallError(f"grid {grid[0]}x{grid[1]} is too small to probe; use at least 6 cells")
    most = n // 3 if split == "cells" else n * (n - 1)
    folds = min(10, most) if folds is None else folds
    if folds < 2:
        raise ConfigError(f"folds must be >= 2, got {folds}")
    if folds > most:
        what = f"each fold holds out at least 3 of its {n} cells" if split == "cells" else f"it has {most} pairs"
        raise ConfigError(
            f"folds = {folds} is more than the {most} a {grid[0]}x{grid[1]} grid allows ({what}); "
            f"use at most {most} folds"
        )
    rng = np.random.default_rng(seed)
    features, offsets, first, second = pair_features(table, grid, max_pairs, rng)
    targets = {"left_right": offsets[:, 0], "up_down": offsets[:, 1]}
    predicted = {name: np.zeros(len(features), dtype=bool) for name in targets}
    predicted_offsets = np.zeros_like(offsets)
    tested = np.zeros(len(features), dtype=bool)
    with single_threaded():
        every_pair = np.ones(len(first), dtype=bool)
        splits = _folds(split, folds, every_pair, first, second, rng)
        for train, test in progress(splits, "probe folds", total=folds, unit="fold"):
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
            if regression == "ridge":
                chosen = _ridge_penalties(split, train, features, offsets, first, second, max_train_pairs, rng)
            else:
                chosen = np.zeros(offsets.shape[1])
            rows = _subsample(train, max_train_pairs, rng)
            paths = ridge_predictions(features[rows], offsets[rows], features[test], sorted(set(chosen.tolist())))
            lookup = {alpha: i for i, alpha in enumerate(sorted(set(chosen.tolist())))}
            for output, alpha in enumerate(chosen.tolist()):
                predicted_offsets[test, output] = paths[lookup[alpha], :, output]
    scores = {}
    for name, delta in targets.items():
        scored = tested & (delta != 0)
        scores[name] = float(np.mean(predicted[name][scored] == (delta[scored] > 0)))
    r2 = float(r2_score(offsets[tested], predicted_offsets[tested]))
    return ProbeResult(scores["left_right"], scores["up_down"], r2, int(tested.sum()), len(first), n * (n - 1))
