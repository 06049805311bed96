"""The fused operator outside Triton's interpreter: its PyTorch arithmetic on CPU (with or without
Triton installed) and the errors that name a bad input."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

from vitpos.attention import attention
from vitpos.attention.triton import fused_attention, op

from .test_kernel import qkv, random_terms


def test_without_triton_the_forced_path_runs_the_pytorch_arithmetic_on_cpu(monkeypatch):
    monkeypatch.setattr(op, "_INSTALLED", False)
    terms, (q, k, v) = random_terms(), qkv()
    leaves = [q, k, v, *terms.tensors()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # computed, not fallen back
        out = attention(q, k, v, terms, scale=0.3, path="triton")
    expected = attention(q, k, v, terms, scale=0.3, path="explicit")
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
    for got, want in zip(
        torch.autograd.grad(out.sum(), leaves), torch.autograd.grad(expected.sum(), leaves), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    assert "vitpos.attention.triton.launch" not in sys.modules  # triton never imported for it


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(ids=torch.zeros(5, 6, dtype=torch.long)), r"ids must be \(6, 6\) or \(2, 6, 6\)"),
        (dict(row_scores=torch.zeros(1, 2, 6, 4)), r"row_scores must be \(B or 1, heads or 1, 1 or 6, 3\)"),
        (dict(col_scores=torch.zeros(1, 2, 1, 3)), r"col_scores must be \(B or 1, heads or 1, 6, 3\)"),
        (dict(bias=torch.zeros(3, 6, 6)), r"bias must broadcast to \(B, heads, N, M\) = \(1, 2, 6, 6\)"),
        (dict(ids=None, bucket_weights=True), "looked up by bucket id: pass ids"),
    ],
)
def test_a_bad_input_is_named(change, message):
    q = torch.zeros(1, 2, 6, 4)
    args = dict(ids=torch.zeros(6, 6, dtype=torch.long), num_buckets=3) | change
    with pytest.raises(ValueError, match=message):
        fused_attention(q, q, q, 0.5, **args)
