"""Every kernel path equals the literal reference, in forward and gradients (float64).

FlexAttention runs forward only on CPU: it is compared in inference; paths that cannot give a
term (a term on values under SDPA or FlexAttention) are compared after their fallback.
"""

import random
import warnings

import pytest
import torch

from vitpos.attention import PATHS, bucketed
from vitpos.encodings.base import SlotContext
from vitpos.models.layers import Attention
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from .reference import reference_attention

SPECS = [
    "irpe:product:ctx:k",
    "irpe:product:ctx:qkv:unshared",
    "irpe:cross:ctx:qkv",
    "irpe:cross:ctx:v:unshared:clip",
    "irpe:euclidean:ctx:qkv:ratio=2.5",
    "irpe:quant:ctx:qk:ratio=1.5",
    "irpe:quant:ctx:kv:squared:ratio=3",
    "irpe:product:ctx:q:clip:ratio=1",
    "irpe:product:bias:k",
    "irpe:cross:bias:qk:unshared",
    "irpe:euclidean:bias:q:unscaled",
    "irpe:quant:bias:qk:clip:unshared",
    "shaw",
    "shaw:max_dist=1",
    "xl",
    "xl:max_dist=2",
    "huang",
    "sasa",
    "sasa:max_dist=2",
    "swin",
    "rope2d",
    "rope2d:mixed",
    "rope2d:theta=10",
]


def random_case(seed: int) -> dict:
    """A random grid, prefix count, training grid and head layout."""
    rng = random.Random(seed)
    return dict(
        grid=(rng.randint(1, 6), rng.randint(1, 6)),
        native=(rng.randint(2, 5), rng.randint(2, 5)),
        prefix=rng.choice([0, 1, 2, 3]),
        heads=rng.choice([1, 2, 3]),
        head_dim=rng.choice([4, 8]),
        batch=rng.choice([1, 2]),
    )


def build_attention(spec_text: str, case: dict) -> Attention:
    spec = SlotSpec.parse(spec_text)
    dim = case["heads"] * case["head_dim"]
    ctx = SlotContext(dim, case["heads"], 1, case["native"], case["prefix"])
    relative = RELATIVE.get(spec.name).from_spec(spec, ctx, layer=0)
    attn = Attention(dim, case["heads"], relative=relative).double()
    with torch.no_grad():
        for p in relative.parameters():  # tables start at zero: make every entry count
            p.normal_(std=0.5)
    return attn


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("spec_text", SPECS)
def test_efficient_equals_reference_forward_and_gradients(spec_text, seed, monkeypatch):
    monkeypatch.setattr(bucketed, "MIN_CHUNK", 3)  # several chunks even on small grids
    case = random_case(1000 * seed + SPECS.index(spec_text))
    attn = build_attention(spec_text, case)
    grid, prefix = case["grid"], case["prefix"]
    n = prefix + grid[0] * grid[1]
    x = torch.randn(case["batch"], n, attn.num_heads * attn.head_dim, dtype=torch.float64, requires_grad=True)
    weight = torch.randn_like(x)
    inputs = [x, *attn.parameters()]

    expected = reference_attention(attn, spec_text, x, grid, prefix, case["native"])
    expected_grads = torch.autograd.grad((expected * weight).sum(), inputs)
    for path in PATHS:
        attn.path = path
        if path == "flex":  # forward only on CPU
            with torch.no_grad():
                out = attn(x, grid, prefix)
            torch.testing.assert_close(out, expected.detach(), rtol=1e-6, atol=1e-10)
            continue
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "attention path .* cannot compute")  # sdpa: the value-term fallback
            out = attn(x, grid, prefix)
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-10)
        grads = torch.autograd.grad((out * weight).sum(), inputs)
        for got, want in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-10)
