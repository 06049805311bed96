"""RoPE's rotation of q and k in one step: real arithmetic (what ``torch.compile`` fuses into one kernel)
equals the eager complex multiplication, the compiled region runs where the policy says so, and the
cos / sin tables are cast once per grid and dtype."""

from __future__ import annotations

import pytest
import torch

from vitpos.attention import attention, kernel, policy, terms
from vitpos.attention.terms import Rotation, rotate
from vitpos.encodings.base import SlotContext
from vitpos.encodings.relative.rope import Rope2d

GRID, HEADS, D = (3, 4), 2, 8


def rotation(variant: str, prefix: int) -> Rotation:
    rope = Rope2d(
        SlotContext(embed_dim=HEADS * D, num_heads=HEADS, depth=1, grid=GRID, num_prefix_tokens=prefix), variant
    )
    rotation = rope.relative_terms(GRID, prefix).rotation
    assert rotation is not None
    return rotation


def qk(prefix: int, dtype=torch.float32):
    n = prefix + GRID[0] * GRID[1]
    return [torch.randn(2, HEADS, n, D).to(dtype).requires_grad_() for _ in range(2)]


@pytest.mark.parametrize("variant", ["axial", "mixed"])
@pytest.mark.parametrize("prefix", [0, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_real_arithmetic_equals_the_complex_multiplication(variant, prefix, dtype):
    turn = rotation(variant, prefix).to(dtype)
    q, k = qk(prefix, dtype)
    real = rotate(q, k, turn.cos_sin, prefix, False)
    complex_ = rotate(q, k, turn.cos_sin, prefix, True)
    weight = torch.randn(2, *q.shape)
    for got, want in zip(real, complex_, strict=True):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    leaves = [q, k, *([turn.cos_sin] if turn.cos_sin.requires_grad else [])]
    grads = torch.autograd.grad((torch.stack(real).float() * weight).sum(), leaves)
    expected = torch.autograd.grad((torch.stack(complex_).float() * weight).sum(), leaves)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.fixture
def traced_rotation(monkeypatch):
    """The compiled region through ``aot_eager`` (traced whole, forward and backward; no code
    generated); yields how many calls it took."""
    calls = []
    region = torch.compile(rotate, fullgraph=True, backend="aot_eager")

    def counted():
        calls.append(1)
        return region

    monkeypatch.setattr(terms, "_compiled_rotate", counted)
    yield calls


@pytest.mark.parametrize("variant", ["axial", "mixed"])
def test_the_kernel_runs_the_compiled_region_where_the_policy_says_so(variant, traced_rotation, monkeypatch):
    relative = rotation(variant, 1)
    rope_terms = terms.RelativeTerms(rotation=relative)
    q, k = qk(1)
    v = torch.randn_like(q)
    expected = attention(q, k, v, rope_terms, scale=0.3)
    assert not traced_rotation  # eager: the default on every device
    expected_grads = torch.autograd.grad(expected.sum(), [q, k])
    monkeypatch.setattr(kernel, "rotation_path", lambda device, dtype, tokens: "compiled")
    out = attention(q, k, v, rope_terms, scale=0.3)
    assert len(traced_rotation) == 1
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    for got, want in zip(torch.autograd.grad(out.sum(), [q, k]), expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_rotation_defaults_to_eager_on_every_device():
    for device in ("cpu", "cuda"):
        for dtype in (torch.float32, torch.bfloat16):
            for tokens in (197, 785):
                assert policy.rotation_path(device, dtype, tokens) == "eager"


def test_cos_sin_are_cast_once_per_grid_and_dtype():
    axial = rotation("axial", 1)
    assert axial.cos_sin.dtype == torch.float64  # the fixed angles, exact
    first, second = axial.to(torch.bfloat16).cos_sin, axial.to(torch.float32).cos_sin
    assert first.dtype == torch.float32 and first is second  # bf16 turns in float32: one cast, kept
    assert axial.to(torch.float64).cos_sin is axial.cos_sin
    mixed = rotation("mixed", 1)  # learned frequencies: cast anew, so the gradient flows
    assert mixed.to(torch.bfloat16).cos_sin.requires_grad
