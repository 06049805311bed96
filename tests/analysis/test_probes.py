"""Relative-location probes on position tables (thesis §4.1, Table 2)."""

import numpy as np
import pytest
import torch

from vitpos.analysis.probes import pair_features, probe_table, sample_pairs
from vitpos.analysis.tables import absolute_table
from vitpos.encodings.sincos import sincos_2d
from vitpos.grid import grid_coords

from .families import tiny_model


def test_pair_features_are_differences_of_all_ordered_pairs():
    table = torch.arange(12.0).reshape(6, 2)  # grid 2x3, row-major
    features, offsets, first, second = pair_features(table, (2, 3))
    assert features.shape == (30, 2) and offsets.shape == (30, 2)
    k = np.flatnonzero((first == 5) & (second == 0))[0]  # cell (row 1, col 2) minus cell (0, 0)
    assert np.allclose(features[k], table[5] - table[0])
    assert np.allclose(offsets[k], [2, 1])  # (dx, dy)
    assert not np.any(first == second)


def test_sincos2d_table_separates_both_directions_before_training():
    result = probe_table(sincos_2d((8, 8), 64).float(), (8, 8))
    assert result.left_right > 0.97 and result.up_down > 0.97
    assert result.distance_r2 > 0.95


def test_fresh_fourier_table_has_a_partial_bias():
    # thesis Table 2: about 92% before training; the default Fourier table's variation is small
    model = tiny_model({"absolute": "fourier"}, img_size=32, patch_size=4, embed_dim=64)
    result = probe_table(absolute_table(model), (8, 8))
    assert 0.75 < result.left_right < 0.99 and 0.75 < result.up_down < 0.99


def test_fresh_learned_table_is_near_chance():
    model = tiny_model({"absolute": "learned"}, img_size=64, embed_dim=64)  # 8x8 grid, trunc-normal init
    result = probe_table(absolute_table(model), (8, 8))
    assert 0.35 < result.left_right < 0.65 and 0.35 < result.up_down < 0.65
    assert abs(result.distance_r2) < 0.15  # the ridge probe reads "no information" as R² ~0
    ols = probe_table(absolute_table(model), (8, 8), regression="ols")
    assert ols.distance_r2 < -1  # least squares interpolates the training cells and extrapolates wildly


def test_a_table_holding_only_columns_knows_left_right_but_not_up_down():
    grid = (6, 7)
    coords = grid_coords(grid)
    rng = torch.Generator().manual_seed(0)
    table = torch.cat([coords[:, :1], 0.01 * torch.randn(42, 7, generator=rng)], dim=1)  # x, plus noise
    result = probe_table(table, grid)
    assert result.left_right == 1.0
    assert 0.3 < result.up_down < 0.7
    assert 0.3 < result.distance_r2 < 0.7  # dx is exact (R² 1), dy is not (R² <= 0): the mean is ~0.5


def test_pair_folds_let_a_random_code_be_memorised():
    # the reason the default folds hold out cells: with folds over pairs a random table of width
    # >= the number of cells is a unique linear code, and its pair relations are decodable
    table = torch.randn(16, 32)
    by_pairs = probe_table(table, (4, 4), split="pairs")
    by_cells = probe_table(table, (4, 4), split="cells")
    assert by_pairs.distance_r2 > 0.99 and by_pairs.left_right > 0.9
    assert by_cells.distance_r2 < 0.5


def test_counts_and_ranges_on_a_non_square_grid():
    result = probe_table(sincos_2d((5, 7), 32).float(), (5, 7), folds=10)
    assert 0 < result.test_pairs < 35 * 34
    for value in (result.left_right, result.up_down):
        assert 0.0 <= value <= 1.0


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(grid=(4, 4), split="rows"), "unknown probe split 'rows'; valid values: cells, pairs"),
        (dict(grid=(4, 4), regression="lasso"), "unknown probe regression 'lasso'; valid values: ridge, ols"),
        (dict(grid=(1, 5)), "too small to probe"),
        (dict(grid=(4, 4), folds=1), "folds must be >= 2"),
        (dict(grid=(3, 3)), r"expected a \(9, D\) table"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, message):
    grid = kwargs.pop("grid")
    table = torch.randn(16 if grid != (1, 5) else 5, 8)
    with pytest.raises(ValueError, match=message):
        probe_table(table, grid, **kwargs)


def test_sampled_pairs_are_distinct_ordered_pairs_of_distinct_cells():
    rng = np.random.default_rng(1)
    first, second = sample_pairs(3136, 5000, rng)
    assert len(first) == 5000 and (first != second).all()
    assert len(set(zip(first.tolist(), second.tolist(), strict=True))) == 5000
    assert first.min() >= 0 and max(first.max(), second.max()) < 3136
    all_first, all_second = sample_pairs(5, None, rng)  # every pair, in row-major order
    assert list(zip(all_first.tolist(), all_second.tolist(), strict=True)) == [
        (i, j) for i in range(5) for j in range(5) if i != j
    ]


def test_a_large_grid_is_probed_on_a_bounded_sample_of_pairs():
    grid = (40, 40)  # 2.5 million ordered pairs
    table = sincos_2d(grid, 64).float()
    result = probe_table(table, grid, max_pairs=20_000, folds=3)
    assert result.pairs == 20_000 and result.all_pairs == 1600 * 1599
    assert result.left_right > 0.95 and result.up_down > 0.95 and result.distance_r2 > 0.9
