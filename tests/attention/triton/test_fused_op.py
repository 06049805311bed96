"""The fused operator itself: tiles that do not divide N, per-bucket gradients shared by programs,
the ``torch.library`` registration (opcheck, fake kernels) and one graph under torch.compile."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import vitpos
from vitpos.attention.triton import fused_attention

from .literal import assert_relative, gather_logits

B, H, D = 2, 2, 32


def inputs(n: int, buckets: int, row_shape, col_shape, bias_shape, maps: int, batch: int = B):
    """qkv (batch, n, 3, H, D), ids and random row, column and bias scores, all leaves but the ids."""
    gen = torch.Generator().manual_seed(0)
    qkv = torch.randn(batch, n, 3, H, D, generator=gen).requires_grad_()
    ids = torch.randint(0, buckets, (maps, n, n) if maps == 2 else (n, n), generator=gen)
    scores = [torch.randn(*shape, generator=gen).requires_grad_() for shape in (row_shape, col_shape, bias_shape)]
    return qkv, ids, *scores


def literal(q, k, v, ids, row, col, bias, scale, value_table):
    """The operator's arithmetic with gathers, in float64."""
    q, k, v, row, col, value_table = (t.double() for t in (q, k, v, row, col, value_table))
    logits = scale * q @ k.transpose(-2, -1) + gather_logits(ids, row, col)
    weights = (logits if bias is None else logits + bias.double()).softmax(-1)
    per_bucket = torch.zeros(*weights.shape[:-1], value_table.shape[0], dtype=torch.float64)
    for id_map in ids if ids.ndim == 3 else ids[None]:
        per_bucket = per_bucket.scatter_add(-1, id_map.expand_as(weights), weights)
    return weights @ v + per_bucket @ value_table


@pytest.mark.parametrize(
    "config,n,k,row_shape,col_shape,bias_shape,maps",
    [
        # 16 x 32 tiles; scores shared over the batch, a dense bias shared over the batch and heads
        ((16, 32), 37, 12, (1, H, 37, 12), (1, H, 37, 12), (1, 1, 37, 37), 2),
        # 32 x 16 tiles; a bias per bucket shared by every query, a dense bias shared by every query
        ((32, 16), 50, 30, (1, 1, 1, 30), (B, H, 50, 30), (B, 1, 1, 50), 1),
    ],
)
def test_tiles_and_shared_gradients(config, n, k, row_shape, col_shape, bias_shape, maps):
    qkv, ids, row, col, bias = inputs(n, k, row_shape, col_shape, bias_shape, maps)
    value_table = torch.randn(k, D, requires_grad=True)
    q, keys, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # non-contiguous views
    scale = D**-0.5
    out, weights = fused_attention(
        q, keys, v, scale, ids, num_buckets=k, row_scores=row, col_scores=col, bias=bias, bucket_weights=True,
        config=config,
    )  # fmt: skip
    assert weights is not None
    out = out + weights @ value_table
    expected = literal(q, keys, v, ids, row, col, bias, scale, value_table)
    assert_relative(out, expected, 1e-5, "out")
    leaves = [qkv, row, col, bias, value_table]
    weight = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out.double() * weight).sum(), leaves)
    expected_grads = torch.autograd.grad((expected * weight).sum(), leaves)
    for name, got, want in zip(["qkv", "row", "col", "bias", "value table"], grads, expected_grads, strict=True):
        assert_relative(got, want, 1e-5, name)


@pytest.mark.parametrize("stored", [False, True], ids=["atomic", "stored"])
def test_opcheck_with_non_contiguous_inputs(stored):
    n, k = 20, 9
    gen = torch.Generator().manual_seed(0)
    qkv = torch.randn(1, n, 3, H, 16, generator=gen).requires_grad_()
    q, k_, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    assert not q.is_contiguous()
    ids = torch.randint(0, k, (n, n), generator=gen)
    row = torch.randn(1, H, 1, k, generator=gen).requires_grad_()
    col = torch.randn(1, H, n, k, generator=gen).transpose(-2, -1).contiguous().transpose(-2, -1).requires_grad_()
    bias = torch.randn(1, 1, n, n, generator=gen).requires_grad_()
    args = (q, k_, v, ids, row, col, bias, 0.25, k, True, [], stored)
    torch.library.opcheck(torch.ops.vitpos.fused_attention.default, args)
    out, lse, weights = torch.ops.vitpos.fused_attention(*args)
    backward_args = (
        torch.randn_like(out), torch.randn_like(weights), q.detach(), k_.detach(), v.detach(), ids, row.detach(),
        col.detach(), bias.detach(), out.detach(), lse.detach(), weights.detach(), 0.25, k, [True, True, True], [],
        stored,
    )  # fmt: skip
    torch.library.opcheck(torch.ops.vitpos.fused_attention_backward.default, backward_args)


def test_a_compiled_irpe_block_is_one_graph_with_the_same_output_and_gradients():
    model = vitpos.create_model(
        "vit_lite_7_4", img_size=28, patch_size=4, embed_dim=64, depth=1, num_heads=2, num_classes=5,
        relative="irpe:product:ctx:qkv",
    )  # fmt: skip
    block = model.stages[0].blocks[0]
    block.attn.path = "triton"
    with torch.no_grad():
        for p in block.attn.relative.parameters():
            p.normal_(std=0.5)
    x = torch.randn(2, 50, 64, requires_grad=True)  # a 7 x 7 grid and a class token
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(block, backend=counter, fullgraph=True)
    results = []
    for run in (block, compiled):
        out = run(x, (7, 7), 1)
        grads = torch.autograd.grad(out.square().sum(), [x, *block.parameters()])
        results.append((out, grads))
    assert counter.frame_count == 1
    (eager, eager_grads), (out, grads) = results
    assert_relative(out, eager, 1e-5, "out")
    for got, want in zip(grads, eager_grads, strict=True):
        assert_relative(got, want, 1e-5, "gradient")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_model_under_autocast_on_the_fused_path_stays_close_to_float32(dtype):
    model = vitpos.create_model(
        "vit_lite_7_4", img_size=28, patch_size=4, embed_dim=32, depth=1, num_heads=2, num_classes=5,
        relative="irpe:cross:ctx:qkv:unshared",
    )  # fmt: skip
    with torch.no_grad():
        for p in model.stages[0].blocks[0].attn.relative.parameters():
            p.normal_(std=0.2)
    x = torch.randn(2, 3, 28, 28)
    model.stages[0].blocks[0].attn.path = "explicit"
    expected = model(x)
    model.stages[0].blocks[0].attn.path = "triton"
    with torch.autocast("cpu", dtype=dtype), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        out = model(x)
    assert out.dtype == dtype
    assert_relative(out, expected, 6e-2 if dtype == torch.bfloat16 else 1e-2, "logits")
    out.float().square().sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), name


def test_more_than_127_buckets_read_int16_ids():
    n, k = 23, 150
    qkv, ids, row, col, _ = inputs(n, k, (B, H, n, k), (1, 1, n, k), (1, 1, 1, 1), 1)
    assert int(ids.max()) > 127  # beyond int8
    q, keys, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    value_table = torch.randn(k, D, requires_grad=True)
    out, weights = fused_attention(
        q, keys, v, 0.2, ids, num_buckets=k, row_scores=row, col_scores=col, bucket_weights=True
    )
    assert weights is not None
    out = out + weights @ value_table
    expected = literal(q, keys, v, ids, row, col, None, 0.2, value_table)
    assert_relative(out, expected, 1e-5, "out")
    leaves = [qkv, row, col, value_table]
    grads = torch.autograd.grad(out.sum(), leaves)
    for name, got, want in zip(
        ["qkv", "row", "col", "value table"], grads, torch.autograd.grad(expected.sum(), leaves), strict=True
    ):
        assert_relative(got, want, 1e-5, name)
