"""The flex paths (the per-bucket tables read at every pair, or the biases per bucket gathered first)
equal the float64 literal reference for the terms every bucketed encoding declares: forward, and
backward through FlexAttention's eager math, with each captured tensor that needs a gradient indexed
once in the ``score_mod`` (Inductor's check, run on every joint graph)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch

from vitpos.attention import attention, flex
from vitpos.attention.policy import FLEX_PATHS

from .flex_backward import flex_backward_on_cpu
from .triton.literal import assert_relative, literal_attention
from .triton.test_fused_terms import padding_mask, random_encoding

CASES = [
    # spec, grid, prefix tokens, heads, extra logit term
    ("irpe:product:bias:qk", (3, 4), 1, 2, None),
    ("irpe:product:ctx:k", (4, 4), 1, 2, "padding"),
    ("irpe:product:ctx:qk:unshared", (3, 5), 0, 3, None),
    ("irpe:product:ctx:qkv", (3, 4), 1, 2, None),  # its logit terms: flex has no term on values
    ("irpe:cross:ctx:qk", (4, 3), 1, 2, "dense bias"),  # two bucket maps
    ("irpe:euclidean:bias:q:unshared", (3, 3), 1, 1, None),
    ("swin", (4, 4), 0, 2, "padding"),
    ("shaw", (3, 4), 1, 2, None),
]
HEAD_DIM = 16


def case_inputs(case, device: str = "cpu", dtype: torch.dtype = torch.float64):
    """q, k, v (2 images), the encoding's terms without a value term, the mask and the leaves."""
    spec_text, grid, prefix, heads, extra = case
    n = prefix + grid[0] * grid[1]
    relative = random_encoding(spec_text, heads, HEAD_DIM, grid, prefix).to(device, dtype)
    terms = replace(relative.relative_terms(grid, prefix), value_table=None)
    assert terms.ids is not None and terms.logit_terms
    q, k, v = (torch.randn(2, heads, n, HEAD_DIM, dtype=dtype, device=device, requires_grad=True) for _ in range(3))
    leaves = [q, k, v, *(p for name, p in relative.named_parameters() if name != "table_v")]  # no value term
    mask = padding_mask(2, n).to(device, dtype) if extra == "padding" else None
    if extra == "dense bias":
        dense = torch.randn(heads, n, n, dtype=dtype, device=device, requires_grad=True)
        terms = replace(terms, bias=dense)
        leaves.append(dense)
    return q, k, v, terms, mask, leaves


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")  # eager on CPU, as meant
@pytest.mark.parametrize("path", FLEX_PATHS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}")
def test_flex_equals_the_literal_reference_in_value_and_gradient(case, path, monkeypatch):
    q, k, v, terms, mask, leaves = case_inputs(case)
    scale = HEAD_DIM**-0.5
    expected = literal_attention(q, k, v, terms, scale, mask)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", "attention path")  # no fallback: flex computes the forward
        assert_relative(attention(q, k, v, terms, scale=scale, mask=mask, path=path), expected, 1e-12, "out")
    with flex_backward_on_cpu(monkeypatch) as verdicts:
        out = attention(q, k, v, terms, scale=scale, mask=mask, path=path)
        weight = torch.randn(out.shape, dtype=torch.float64)
        grads = torch.autograd.grad((out * weight).sum(), leaves, retain_graph=True)  # terms: one graph
    assert verdicts and set(verdicts) == {"valid"}, verdicts
    assert_relative(out, expected, 1e-12, "out")
    for i, (got, want) in enumerate(zip(grads, torch.autograd.grad((expected * weight).sum(), leaves), strict=True)):
        assert_relative(got, want, 1e-10, f"gradient {i}")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_the_gathered_bias_is_batch_free_and_replaces_the_bias_table():
    relative = random_encoding("irpe:product:bias:qk:unshared", 3, HEAD_DIM, (3, 4), 1)
    terms = relative.relative_terms((3, 4), 1)
    gathered = flex.gathered_bias(terms)
    assert terms.bias_table is not None and gathered.bias_table is None
    assert gathered.bias is not None and gathered.bias.shape == (3, 13, 13)
    assert torch.equal(gathered.bias, terms.logits(None, None, 1.0)[0])


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_the_check_refuses_a_score_mod_that_indexes_a_table_twice(monkeypatch):
    """The form Inductor refuses (a table read once per bucket map, by a chained index) fails the check."""
    q, k, v = (torch.randn(1, 1, 6, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    row = torch.randn(1, 1, 6, 4, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, 4, (2, 6, 6))

    def twice(score, b, h, q_idx, kv_idx):
        return score + row[0, 0, q_idx][ids[0][q_idx, kv_idx]] + row[0, 0, q_idx][ids[1][q_idx, kv_idx]]

    with flex_backward_on_cpu(monkeypatch) as verdicts, pytest.raises(AssertionError):
        flex.flex_attention(q, k, v, twice, 1.0).sum().backward()
    assert verdicts and all("multiple indexing operations" in v for v in verdicts)
