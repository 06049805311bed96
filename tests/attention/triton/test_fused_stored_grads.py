"""The ``triton_stored`` path (score gradients stored once, reduced per bucket by matmuls, no atomics)
equals the float64 literal reference, value and every gradient, in Triton's interpreter: every bucket
method, bias and contextual terms on q, k and v, shared and per-head tables, padding, a dense bias,
fp32, bf16 and fp16 (Swin's shifted windows: ``test_fused_terms.py``, on both variants). Tiny grids:
one tile per (image, head)."""

from __future__ import annotations

import pytest
import torch

from vitpos.attention import attention

from .literal import assert_relative
from .test_fused_terms import check_fused_path, random_encoding

CASES = [
    # spec, grid, prefix tokens, batch, heads, head dim, dtype, extra logit term
    ("irpe:euclidean:bias:qk", (3, 4), 1, 2, 2, 16, torch.float32, None),
    ("irpe:quant:ctx:k:unshared", (4, 3), 1, 2, 2, 16, torch.float32, None),
    ("irpe:cross:ctx:qkv", (3, 3), 1, 2, 2, 16, torch.float32, "padding"),
    ("irpe:product:ctx:q", (4, 4), 0, 1, 2, 16, torch.float32, "dense bias"),
    ("irpe:product:bias:qk:unshared", (3, 4), 1, 2, 2, 16, torch.float32, "padding"),
    ("irpe:product:ctx:qkv:unshared", (3, 3), 1, 2, 2, 16, torch.bfloat16, "padding"),
    ("irpe:cross:bias:k", (3, 3), 1, 2, 1, 16, torch.bfloat16, None),
    ("irpe:euclidean:ctx:qk", (3, 3), 1, 2, 2, 16, torch.float16, None),
]
HEAD_DIM = 16


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1][0]}x{c[1][1]}+{c[2]}-{c[6]}-{c[7]}")
def test_stored_score_gradients_equal_the_literal_reference(case):
    check_fused_path(case, "triton_stored")


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
