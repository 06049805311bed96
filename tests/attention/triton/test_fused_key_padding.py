"""A padded batch's key mask on the ``triton`` path (kernels in the interpreter) equals the explicit
path's: forward and the gradients of q, k, v and the tables."""

from __future__ import annotations

import pytest
import torch

from vitpos.attention import attention
from vitpos.encodings.base import SlotContext
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec


@pytest.mark.parametrize("spec_text", ["irpe:product:ctx:qkv", "irpe:euclidean:bias:qk"])
def test_key_padding_on_the_fused_path_equals_the_explicit_path(spec_text):
    grid, prefix, heads, head_dim = (5, 6), 1, 2, 16
    n = prefix + grid[0] * grid[1]
    spec = SlotSpec.parse(spec_text)
    relative = RELATIVE.get(spec.name).from_spec(spec, SlotContext(heads * head_dim, heads, 1, grid, prefix))
    with torch.no_grad():
        for p in relative.parameters():
            p.normal_(std=0.5)
    q, k, v = (torch.randn(2, heads, n, head_dim, requires_grad=True) for _ in range(3))
    key_padding = torch.zeros(2, n, dtype=torch.bool)
    key_padding[0, prefix:] = ((torch.arange(grid[0])[:, None] >= 3) | (torch.arange(grid[1])[None] >= 4)).flatten()
    leaves = [q, k, v, *relative.parameters()]
    results = []
    for path in ("triton", "explicit"):
        out = attention(q, k, v, relative.relative_terms(grid, prefix), scale=head_dim**-0.5, key_padding=key_padding,
                        path=path)  # fmt: skip
        results.append((out, torch.autograd.grad(out.square().sum(), leaves)))
    (fused, fused_grads), (explicit, explicit_grads) = results
    torch.testing.assert_close(fused, explicit, rtol=1e-5, atol=1e-5)
    for got, expected in zip(fused_grads, explicit_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
