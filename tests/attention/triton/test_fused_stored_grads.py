"""The ``triton_stored`` path (score gradients stored once, reduced per bucket by matmuls, no atomics)
equals the float64 literal reference, value and every gradient, in Triton's interpreter: every bucket
method, bias and contextual terms on q, k and v, shared and per-head tables, padding, a dense bias,
fp32, bf16 and fp16 (Swin's shifted windows: ``test_fused_terms.py``, on both variants). Tiny grids:
one tile per (image, head)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch

from vitpos.attention import attention

from .literal import assert_relative, literal_attention
from .test_fused_terms import TOLERANCE, padding_mask, random_encoding

CASES = [
    # spec, grid, prefix tokens, batch, heads, dtype, extra logit term
    ("irpe:euclidean:bias:qk", (3, 4), 1, 2, 2, torch.float32, None),
    ("irpe:quant:ctx:k:unshared", (4, 3), 1, 2, 2, torch.float32, None),
    ("irpe:cross:ctx:qkv", (3, 3), 1, 2, 2, torch.float32, "padding"),
    ("irpe:product:ctx:q", (4, 4), 0, 1, 2, torch.float32, "dense bias"),
    ("irpe:product:bias:qk:unshared", (3, 4), 1, 2, 2, torch.float32, "padding"),
    ("irpe:product:ctx:qkv:unshared", (3, 3), 1, 2, 2, torch.bfloat16, "padding"),
    ("irpe:cross:bias:k", (3, 3), 1, 2, 1, torch.bfloat16, None),
    ("irpe:euclidean:ctx:qk", (3, 3), 1, 2, 2, torch.float16, None),
]
HEAD_DIM = 16


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1][0]}x{c[1][1]}+{c[2]}-{c[5]}-{c[6]}")
def test_stored_score_gradients_equal_the_literal_reference(case):
    spec_text, grid, prefix, batch, heads, dtype, extra = case
    n = prefix + grid[0] * grid[1]
    relative = random_encoding(spec_text, heads, HEAD_DIM, grid, prefix)
    q, k, v = (torch.randn(batch, heads, n, HEAD_DIM).to(dtype).requires_grad_() for _ in range(3))
    terms = relative.relative_terms(grid, prefix)
    leaves = [q, k, v, *relative.parameters()]
    mask = padding_mask(batch, n) if extra == "padding" else None
    if extra == "dense bias":
        dense = torch.randn(heads, n, n, requires_grad=True)
        terms = replace(terms, bias=dense)
        leaves.append(dense)
    scale = HEAD_DIM**-0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: the fused path computes the call
        masked = None if mask is None else mask.to(dtype)
        out = attention(q, k, v, terms, scale=scale, mask=masked, path="triton_stored")
    expected = literal_attention(q, k, v, terms, scale, mask)
    tol = TOLERANCE[dtype]
    assert out.dtype == dtype
    assert_relative(out, expected, tol, "out")
    weight = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out.double() * weight).sum(), leaves, retain_graph=True)
    expected_grads = torch.autograd.grad((expected * weight).sum(), leaves)
    names = ["q", "k", "v", *(name for name, _ in relative.named_parameters()), "dense bias"][: len(leaves)]
    for name, got, want in zip(names, grads, expected_grads, strict=True):
        assert got.dtype == want.dtype
        assert_relative(got, want, tol, name)


def test_both_variants_give_the_same_gradients():
    """Atomics and stored score gradients: the same table gradients up to float32 summation order."""
    relative = random_encoding("irpe:product:ctx:qkv:unshared", 2, HEAD_DIM, (3, 3), 1)
    terms = relative.relative_terms((3, 3), 1)
    q, k, v = (torch.randn(2, 2, 10, HEAD_DIM, requires_grad=True) for _ in range(3))
    leaves = [q, k, v, *relative.parameters()]
    results = []
    for path in ("triton", "triton_stored"):
        out = attention(q, k, v, terms, scale=0.25, path=path)
        results.append(torch.autograd.grad(out.square().sum(), leaves, retain_graph=True))
    names = ["q", "k", "v", *(name for name, _ in relative.named_parameters())]
    for name, atomic, stored in zip(names, *results, strict=True):
        assert_relative(stored, atomic, 1e-5, name)
