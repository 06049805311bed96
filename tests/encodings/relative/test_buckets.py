"""Index functions g and h, the four bucket methods, prefix buckets and the id cache."""

import math

import pytest
import torch

import vitpos
from vitpos.encodings.relative.buckets import (
    METHODS,
    Bucketing,
    IndexFunction,
    clip_index,
    piecewise_index,
    quantize_distance,
    relative_buckets,
)

from .reference import AxisIndex, reference_ids


def g(values, ratio):
    return piecewise_index(torch.tensor(values, dtype=torch.float64), ratio, 2 * ratio, 8 * ratio).tolist()


def test_piecewise_hand_values_at_the_default_ratio():
    # alpha = 1.9, beta = 3.8, gamma = 15.2, outputs in [-3, 3]. Beyond alpha:
    # g(2) = round(1.9 + ln(2/1.9)/ln 8 * 1.9) = round(1.947) = 2; g(3) = round(2.317) = 2
    # g(4) = round(2.580) = 3;  g(13) = min(3, round(3.657)) = 3
    assert g([0, 1, -1, 1.4, 1.9, 2, 3, 4, 13, -3, -4, -13], 1.9) == [0, 1, -1, 1, 2, 2, 2, 3, 3, -2, -3, -3]


def test_piecewise_hand_values_at_ratio_20():
    # alpha = 20, beta = 40, gamma = 160: exact rounding up to 20, then
    # g(21) = round(20 + ln(1.05)/ln 8 * 20) = round(20.47) = 20; g(30) = round(23.90) = 24
    # g(160) = round(20 + 20) = 40 = beta; g(1000) is clipped to 40
    assert g([18.38, 21, 30, 160, 1000, -30], 20) == [18, 20, 24, 40, 40, -24]


def test_clip_hand_values():
    x = torch.tensor([0.0, 1.4, 2, 3, 4, -13, 13])
    assert clip_index(x, 3.8).tolist() == [0, 1, 2, 3, 3, -3, 3]
    assert clip_index(x, 2).tolist() == [0, 1, 2, 2, 2, -2, 2]


@pytest.mark.parametrize("kind", ["piecewise", "clip"])
@pytest.mark.parametrize("ratio", [0.5, 1.9, 3, 7.3, 20])
def test_index_functions_are_odd_monotone_and_bounded(kind, ratio):
    fn = IndexFunction.from_ratio(kind, ratio)
    x = torch.linspace(-300, 300, 6001, dtype=torch.float64)
    y = fn(x)
    assert y.dtype == torch.long
    assert torch.equal(y, -fn(-x))
    assert (y.diff() >= 0).all()
    assert y.abs().max() == fn.bound == math.floor(2 * ratio)
    assert fn.size == 2 * fn.bound + 1


def test_index_function_matches_the_scalar_reference():
    x = torch.linspace(-60, 60, 2401, dtype=torch.float64)
    for kind in ("piecewise", "clip"):
        for ratio in (0.7, 1.9, 4.4, 20):
            ours = IndexFunction.from_ratio(kind, ratio)(x).tolist()
            assert ours == [AxisIndex(kind, ratio=ratio)(v) for v in x.tolist()], (kind, ratio)


def test_quantization_ranks_distances_of_integer_offsets():
    # distances 0, 1, sqrt2, 2, sqrt5, sqrt8, 3, sqrt10, sqrt13, 4 -> consecutive integers (Eq. 21)
    squared = torch.tensor([0, 1, 2, 4, 5, 8, 9, 10, 13, 16, 17, 18, 20, 25])
    assert quantize_distance(squared).tolist() == list(range(14))
    assert quantize_distance(squared, "squared").tolist() == squared.tolist()


def test_euclidean_merges_1_0_and_1_1_but_quantization_separates_them():
    # the paper's own example: offsets (1, 0) and (1, 1) from the centre of a 3x3 grid
    centre, right, diagonal = 4, 5, 8
    euc, _ = relative_buckets("euclidean", (3, 3))
    quant, _ = relative_buckets("quant", (3, 3))
    assert euc[centre, right] == euc[centre, diagonal]
    assert quant[centre, right] != quant[centre, diagonal]


def test_product_ids_of_one_row_by_hand():
    # 1x5 grid, query 0, keys 0..4: dy = 0 -> row bucket 3; dx = 0..-4 -> g = 0, -1, -2, -2, -3
    ids, num = relative_buckets("product", (1, 5))
    assert num == 49
    assert ids[0].tolist() == [3 * 7 + 3 + g for g in (0, -1, -2, -2, -3)]


@pytest.mark.parametrize("ratio", [0.5, 1.9, 2.6, 20])
@pytest.mark.parametrize("index", ["piecewise", "clip"])
def test_bucket_counts_per_method(ratio, index):
    size = 2 * math.floor(2 * ratio) + 1
    expected = {"euclidean": size, "quant": size, "cross": 2 * size, "product": size * size}
    for method in METHODS:
        for prefix, extra in ((0, 0), (1, 1), (4, 1)):
            _, num = relative_buckets(method, (3, 5), ratio=ratio, index=index, num_prefix_tokens=prefix)
            per_table = 2 if method == "cross" else 1
            assert num == expected[method] + per_table * extra, (method, prefix)


def test_default_product_has_49_buckets_and_50_with_the_class_token():
    ids, num = relative_buckets("product", (14, 14))
    assert num == 49 and ids.unique().numel() == 49
    ids, num = relative_buckets("product", (14, 14), num_prefix_tokens=1)
    assert num == 50 and ids.unique().numel() == 50


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("prefix", [1, 3])
def test_prefix_tokens_use_exactly_one_extra_bucket(method, prefix):
    grid = (4, 3)
    plain, num_plain = relative_buckets(method, grid)
    ids, num = relative_buckets(method, grid, num_prefix_tokens=prefix)
    maps, plain_maps = (ids, plain) if method == "cross" else (ids[None], plain[None])
    offset = 0
    for m, (id_map, plain_map) in enumerate(zip(maps, plain_maps, strict=True)):
        table_size = (num_plain // len(maps)) + 1
        extra = offset + table_size - 1
        assert (id_map[:prefix] == extra).all() and (id_map[:, :prefix] == extra).all()
        assert torch.equal(id_map[prefix:, prefix:], plain_map + m)  # cross: columns shift by the rows' extra bucket
        assert not (id_map[prefix:, prefix:] == extra).any()
        offset += table_size
    assert num == num_plain + len(maps)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("index", ["piecewise", "clip"])
def test_ids_match_the_pairwise_reference(method, index):
    for grid, prefix, ratio in (((3, 4), 0, 1.9), ((5, 2), 2, 1.1), ((6, 6), 1, 2.5)):
        ids, _ = relative_buckets(method, grid, ratio=ratio, index=index, num_prefix_tokens=prefix)
        expected = reference_ids(method, grid, prefix, AxisIndex(index, ratio=ratio))
        assert torch.equal(ids, torch.stack(expected) if method == "cross" else expected[0])


@pytest.mark.parametrize("method", METHODS)
def test_an_offset_has_the_same_bucket_on_every_grid(method):
    def by_offset(grid):
        ids, _ = relative_buckets(method, grid, ratio=2.2)
        h, w = grid
        table = {}
        for i in range(h * w):
            for j in range(h * w):
                offset = (i // w - j // w, i % w - j % w)
                table.setdefault(offset, set()).add(tuple(ids[..., i, j].reshape(-1).tolist()))
        return table

    small, large = by_offset((3, 4)), by_offset((7, 6))
    assert all(len(v) == 1 for v in large.values())
    assert all(small[o] == large[o] for o in small)


def test_undirected_methods_are_symmetric_and_directed_ones_are_not():
    for method in METHODS:
        ids, _ = relative_buckets(method, (4, 4))
        symmetric = torch.equal(ids, ids.transpose(-2, -1))
        assert symmetric == (method in ("euclidean", "quant")), method


def test_ids_are_cached_per_grid_prefix_and_device():
    first = Bucketing("product").ids((5, 6), 1, "cpu")
    assert Bucketing("product").ids((5, 6), 1, "cpu") is first
    assert Bucketing("product").ids((5, 6), 2, "cpu") is not first
    assert Bucketing("product").ids((6, 5), 1, "cpu").shape == first.shape


def test_public_function_is_exported():
    ids, num = vitpos.relative_buckets("cross", (2, 3), num_prefix_tokens=1)
    assert ids.shape == (2, 7, 7) and ids.dtype == torch.long and num == 16
    assert ids[0].max() < 8 <= ids[1].min()  # rows first, then columns


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        (
            dict(method="manhattan"),
            r"unknown bucket method 'manhattan'; valid values: euclidean, quant, cross, product",
        ),
        (dict(index="log"), r"unknown index function 'log'; valid values: piecewise, clip"),
        (dict(ratio=0.2), r"ratio must be >= 0.5"),
        (dict(grid=(0, 3)), r"grid must be \(H, W\) with positive integers"),
        (dict(num_prefix_tokens=-1), r"num_prefix_tokens must be >= 0"),
        (dict(method="quant", quant="cubed"), r"unknown quantization 'cubed'; valid values: rank, squared"),
    ],
)
def test_bad_arguments_say_what_is_wrong(kwargs, pattern):
    args = dict(method="product", grid=(3, 3)) | kwargs
    with pytest.raises(ValueError, match=pattern):
        relative_buckets(args.pop("method"), args.pop("grid"), **args)


@pytest.mark.parametrize("ratio", [1.9, 3.0])
def test_rounded_euclidean_differs_from_eq_20_only_beyond_alpha(ratio):
    index = IndexFunction.from_ratio("piecewise", ratio)
    exact = Bucketing("euclidean", index).build((9, 9))
    rounded = Bucketing("euclidean", index, round_distance=True).build((9, 9))
    offsets = torch.cartesian_prod(torch.arange(9), torch.arange(9))
    distance = torch.cdist(offsets.double(), offsets.double())
    assert torch.equal(exact[distance <= ratio], rounded[distance <= ratio])
    assert not torch.equal(exact, rounded)
    assert torch.equal(rounded, index(distance.round()) + index.bound)


def test_round_distance_is_for_euclidean_only():
    with pytest.raises(ValueError, match="round_distance applies to the euclidean method only"):
        Bucketing("product", round_distance=True)
