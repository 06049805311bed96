"""The ``triton`` path (kernels in the interpreter) equals the float64 literal reference for the
terms every bucketed encoding declares, on every host shape: forward and every gradient."""

from __future__ import annotations

import copy
import warnings
from dataclasses import replace

import pytest
import torch

from vitpos.attention import attention
from vitpos.attention.policy import FUSED_PATHS
from vitpos.encodings.base import SlotContext
from vitpos.models.windows import WindowAttention
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from .literal import assert_relative, literal_attention

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 5e-3}

CASES = [
    # spec, grid, prefix tokens, batch, heads, head dim, dtype, extra logit term
    ("irpe:product:ctx:qkv", (7, 7), 1, 2, 2, 32, torch.float32, None),
    ("irpe:cross:ctx:qkv:unshared", (7, 10), 1, 1, 2, 64, torch.float32, "padding"),
    ("irpe:euclidean:bias:qk:unshared", (10, 10), 0, 2, 2, 32, torch.float32, "dense bias"),
    ("irpe:quant:ctx:kv", (14, 14), 1, 1, 2, 32, torch.float32, None),
    ("irpe:product:bias:k", (14, 14), 1, 1, 1, 32, torch.float32, None),
    ("irpe:product:ctx:qkv:unshared", (7, 10), 1, 2, 2, 32, torch.bfloat16, "padding"),
    ("irpe:cross:bias:q", (7, 7), 1, 2, 1, 128, torch.float16, None),
]


def random_encoding(spec_text: str, heads: int, head_dim: int, grid, prefix: int):
    """The encoding of ``spec_text`` with random non-zero tables (they start at zero)."""
    spec = SlotSpec.parse(spec_text)
    relative = RELATIVE.get(spec.name).from_spec(spec, SlotContext(heads * head_dim, heads, 1, grid, prefix))
    with torch.no_grad():
        for p in relative.parameters():
            p.normal_(std=0.5)
    return relative


def padding_mask(batch: int, tokens: int) -> torch.Tensor:
    """Image 0 of the batch has its last 9 keys padded (-inf); the others none."""
    mask = torch.zeros(batch, 1, 1, tokens)
    mask[0, ..., -9:] = float("-inf")
    return mask


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1][0]}x{c[1][1]}+{c[2]}-{c[6]}-{c[7]}")
def test_fused_path_equals_the_literal_reference(case):
    check_fused_path(case, "triton")


def check_fused_path(case, path: str) -> None:
    """The fused ``path`` on ``case`` (spec, grid, prefix, batch, heads, head width, dtype, extra term)
    against the float64 literal reference: output and every gradient."""
    spec_text, grid, prefix, batch, heads, head_dim, dtype, extra = case
    n = prefix + grid[0] * grid[1]
    relative = random_encoding(spec_text, heads, head_dim, grid, prefix)
    q, k, v = (torch.randn(batch, heads, n, head_dim).to(dtype).requires_grad_() for _ in range(3))
    terms = relative.relative_terms(grid, prefix)
    assert terms.ids is not None  # bucketed terms, not a dense bias
    leaves = [q, k, v, *relative.parameters()]
    mask = padding_mask(batch, n) if extra == "padding" else None
    if extra == "dense bias":  # a bias without bucket form, with a gradient (as LaPE's normalised bias)
        dense = torch.randn(heads, n, n, requires_grad=True)
        terms = replace(terms, bias=dense)
        leaves.append(dense)
    scale = head_dim**-0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: the fused path computes the call
        out = attention(q, k, v, terms, scale=scale, mask=None if mask is None else mask.to(dtype), path=path)
    expected = literal_attention(q, k, v, terms, scale, mask)
    assert out.dtype == dtype
    tol = TOLERANCE[dtype]
    assert_relative(out, expected, tol, "out")
    weight = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out.double() * weight).sum(), leaves, retain_graph=True)  # terms: one graph
    expected_grads = torch.autograd.grad((expected * weight).sum(), leaves)
    names = ["q", "k", "v", *(name for name, _ in relative.named_parameters()), "dense bias"][: len(leaves)]
    for name, got, want in zip(names, grads, expected_grads, strict=True):
        assert got.dtype == want.dtype
        assert_relative(got, want, tol, name)


@pytest.mark.parametrize("path", FUSED_PATHS)
def test_swin_windows_with_the_shift_mask_equal_the_explicit_path(path):
    """A 9 x 9 grid in shifted 7 x 7 windows: padded to 14 x 14, four windows, shift and padding masks."""
    spec = SlotSpec.parse("swin")
    relative = RELATIVE.get(spec.name).from_spec(spec, SlotContext(32, 1, 1, (7, 7), 0))
    attn = WindowAttention(32, 1, 7, True, relative=relative)
    with torch.no_grad():
        relative.table.normal_(std=0.5)
    reference = copy.deepcopy(attn).double()
    reference.path, attn.path = "explicit", path
    x = torch.randn(1, 81, 32, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = attn(x, (9, 9), 0)
    expected = reference(x64, (9, 9), 0)
    assert_relative(out, expected, 1e-5, "out")
    weight = torch.randn(out.shape, dtype=torch.float64)
    (out.double() * weight).sum().backward()
    (expected * weight).sum().backward()
    assert_relative(x.grad, x64.grad, 1e-5, "x")
    for (name, p), p64 in zip(attn.named_parameters(), reference.parameters(), strict=True):
        assert_relative(p.grad, p64.grad, 1e-5, name)
