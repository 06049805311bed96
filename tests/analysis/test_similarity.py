"""Cosine-similarity maps and the locality score."""

import pytest
import torch

from vitpos.analysis.similarity import default_references, locality, parse_references, similarity_maps
from vitpos.encodings.sincos import sincos_2d


def test_maps_equal_a_slow_cosine_loop_on_a_non_square_grid():
    grid = (3, 5)
    table = torch.randn(15, 8)
    refs = [(0, 0), (2, 4), (1, 3)]
    maps = similarity_maps(table, grid, refs)
    assert maps.shape == (3, 3, 5)
    for k, (r, c) in enumerate(refs):
        for i in range(3):
            for j in range(5):
                expected = torch.nn.functional.cosine_similarity(table[r * 5 + c], table[i * 5 + j], dim=0)
                assert torch.isclose(maps[k, i, j], expected, atol=1e-6)
        assert torch.isclose(maps[k, r, c], torch.tensor(1.0))
    assert maps.abs().max() <= 1 + 1e-6


def test_sincos2d_map_falls_off_with_distance_and_is_symmetric():
    grid = (9, 9)
    maps = similarity_maps(sincos_2d(grid, 64).float(), grid, [(4, 4)])[0]
    assert torch.allclose(maps, maps.flip(0), atol=1e-5) and torch.allclose(maps, maps.flip(1), atol=1e-5)
    assert maps[4, 5] > maps[4, 6] > maps[4, 8]


def test_locality_separates_structured_from_random_tables():
    grid = (8, 8)
    assert locality(sincos_2d(grid, 64).float(), grid) > 0.1
    assert abs(locality(torch.randn(64, 64), grid)) < 0.05
    smooth = torch.linspace(0, 1, 64)[:, None] * torch.ones(1, 4) + torch.eye(64)[:, :4]
    assert -2.0 <= locality(smooth, grid) <= 2.0


def test_references():
    assert default_references((4, 6)) == [(0, 0), (2, 0), (2, 3)]
    assert default_references((1, 1)) == [(0, 0)]
    assert parse_references("0,1; 3,2", (4, 4)) == [(0, 1), (3, 2)]
    with pytest.raises(ValueError, match="outside the 4x4 grid"):
        parse_references("4,0", (4, 4))
    with pytest.raises(ValueError, match="must look like 'row,col'"):
        parse_references("a", (4, 4))


@pytest.mark.parametrize("grid", [(5, 7), (1, 6), (9, 2)])
def test_locality_equals_the_literal_mean_over_the_similarity_matrix(grid):
    h, w = grid
    table = torch.randn(h * w, 12, generator=torch.Generator().manual_seed(h * w), dtype=torch.float64)
    unit = torch.nn.functional.normalize(table, dim=-1)
    sim = unit @ unit.t()
    pairs = [(a, b) for a in range(h * w) for b in range(h * w) if a != b]
    neighbours = [sim[r * w + c, r * w + c + 1] for r in range(h) for c in range(w - 1)]
    neighbours += [sim[r * w + c, (r + 1) * w + c] for r in range(h - 1) for c in range(w)]
    want = torch.stack(neighbours).mean() - torch.stack([sim[a, b] for a, b in pairs]).mean()
    assert locality(table, grid) == pytest.approx(float(want), abs=1e-12)
