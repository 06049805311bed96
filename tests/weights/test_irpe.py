"""iRPE model-zoo checkpoints: vitpos equals Cream's forward pass (transposed query term,
unscaled bias, rounded Euclidean ids) once loaded, for every method, mode and target set."""

import pytest
import torch

import vitpos
from vitpos import CheckpointError
from vitpos.encodings.relative.buckets import Bucketing, IndexFunction
from vitpos.weights.irpe import query_order

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

GRID = 6  # distances up to 7.1, beyond alpha = 1.9: Euclidean rounding and the piecewise tail matter
SMALL = dict(embed_dim=32, depth=2, num_heads=4, patch_size=4, img_size=4 * GRID, num_classes=5)

CASES = [
    # vitpos slot value (as a preset would give it), Cream method, ratio, targets, mode, shared
    ("irpe:product:ctx:qkv", "product", 1.9, "qkv", "contextual", True),
    ("irpe:product:ctx:qk:unshared", "product", 1.9, "qk", "contextual", False),
    ("irpe:euclidean:ctx:k", "euc", 1.9, "k", "contextual", True),
    ("irpe:euclidean:ctx:qv:unshared", "euc", 1.5, "qv", "contextual", False),
    ("irpe:quant:ctx:k:squared", "quant", 1.9, "k", "contextual", True),
    ("irpe:quant:ctx:qk", "quant", 1.9, "qk", "contextual", True),  # loading selects squared
    ("irpe:cross:ctx:qkv", "cross", 1.9, "qkv", "contextual", True),
    ("irpe:product:bias:qk", "product", 1.9, "qk", "bias", True),
    ("irpe:cross:bias:q:unshared", "cross", 1.9, "q", "bias", False),
]


def cream_ids(method: str, ratio: float) -> tuple[dict, int]:
    if method == "cross":
        rows, count = reference.cream_buckets("rows", GRID, GRID, ratio, skip=1)
        cols, _ = reference.cream_buckets("cols", GRID, GRID, ratio, skip=1)
        return {"rp_rows": rows, "rp_cols": cols}, count
    ids, count = reference.cream_buckets(method, GRID, GRID, ratio, skip=1)
    return {"main": ids}, count


@pytest.mark.parametrize("relative, method, ratio, on, mode, shared", CASES)
def test_irpe_checkpoint_equals_creams_forward(tmp_path, relative, method, ratio, on, mode, shared):
    ids, count = cream_ids(method, ratio)
    fill = layouts.Filler(seed=len(relative))
    sd = layouts.timm_vit(fill, dim=32, depth=2, patch=4, grid=GRID, classes=5)
    layouts.irpe_tables(
        sd, fill, depth=2, heads=4, head_dim=8, on=on, buckets=count, shared=shared, mode=mode, cross=method == "cross"
    )
    spec = relative if ratio == 1.9 else f"{relative}:ratio={ratio}"
    model = load_float64("deit_tiny_patch16_224", save_pth(sd, tmp_path / "irpe.pth"), relative=spec, **SMALL)
    x = images(4 * GRID)
    assert_close(model(x), reference.vit(sd, x, heads=4, ids=ids))


@pytest.mark.parametrize(
    "relative, method, option",
    [
        ("irpe:euclidean:ctx:k", "euc", ":round"),
        ("irpe:product:bias:k", "product", ":unscaled"),
        ("irpe:quant:ctx:k", "quant", ":squared"),
    ],
)
def test_loading_selects_the_released_options(tmp_path, relative, method, option):
    _ids, count = cream_ids(method, 1.9)
    fill = layouts.Filler(seed=2)
    sd = layouts.timm_vit(fill, dim=32, depth=1, patch=4, grid=GRID, classes=5)
    layouts.irpe_tables(
        sd, fill, depth=1, heads=4, head_dim=8, on="k", buckets=count, mode="ctx" if "ctx" in relative else "bias"
    )
    path = save_pth(sd, tmp_path / "irpe.pth")
    model = load_float64("deit_tiny_patch16_224", path, relative=relative, **{**SMALL, "depth": 1})
    released = model.cfg.position.relative
    assert released == relative + option
    paper = vitpos.create_model("deit_tiny_patch16_224", relative=relative, **{**SMALL, "depth": 1})
    with pytest.raises(CheckpointError, match=f"irpe.pth.*relative='{released}'.*create_model"):
        vitpos.load_weights(paper, path)


def test_the_released_options_change_the_ids_or_the_logits():
    exact = Bucketing("euclidean", IndexFunction.from_ratio("piecewise", 1.9))
    rounded = Bucketing("euclidean", IndexFunction.from_ratio("piecewise", 1.9), round_distance=True)
    assert not torch.equal(exact.build((GRID, GRID), 1), rounded.build((GRID, GRID), 1))
    cream, _ = reference.cream_buckets("euc", GRID, GRID, 1.9, skip=1)
    assert torch.equal(rounded.build((GRID, GRID), 1), cream)


@pytest.mark.parametrize("grid", [(14, 14), (24, 24), (5, 9)])
def test_rounded_euclidean_ids_equal_creams_at_the_preset_ratio(grid):
    rounded = Bucketing("euclidean", IndexFunction.from_ratio("piecewise", 20), round_distance=True)
    cream, _ = reference.cream_buckets("euc", *grid, 20, skip=1)
    assert torch.equal(rounded.build(grid, 1), cream)


def test_query_order_reverses_product_and_cross_buckets_but_not_the_prefix_bucket():
    product = Bucketing("product", IndexFunction.from_ratio("piecewise", 1.9))
    order = query_order(product, 1)
    assert order[:49].tolist() == [48 - t for t in range(49)] and order[49] == 49
    cross = Bucketing("cross", IndexFunction.from_ratio("piecewise", 1.9))
    order = query_order(cross, 1)
    assert order[:8].tolist() == [6, 5, 4, 3, 2, 1, 0, 7] and order[8:].tolist() == [14, 13, 12, 11, 10, 9, 8, 15]
    euclidean = Bucketing("euclidean", IndexFunction.from_ratio("piecewise", 1.9))
    assert query_order(euclidean, 1).tolist() == list(range(8))


def test_round_switch_is_for_euclidean_only():
    with pytest.raises(ValueError, match="'round' changes the Euclidean method only"):
        vitpos.create_model("deit_tiny_patch16_224", relative="irpe:product:ctx:k:round")


@pytest.mark.parametrize("grid", [(14, 14), (24, 24)])
def test_relative_buckets_gives_the_released_euclidean_ids_with_round(grid):
    ids, num = vitpos.relative_buckets("euclidean", grid, ratio=20, num_prefix_tokens=1, round_distance=True)
    cream, count = reference.cream_buckets("euc", *grid, 20, skip=1)
    assert torch.equal(ids, cream) and num == count
    exact, _ = vitpos.relative_buckets("euclidean", grid, ratio=20, num_prefix_tokens=1)
    assert not torch.equal(exact, cream) or grid == (14, 14)  # the same ids on 14x14, different beyond alpha = 20
