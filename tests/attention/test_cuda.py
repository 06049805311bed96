"""The CUDA paths (FlexAttention forward and backward, the forced fused path on its first autotuned call,
autocast training); skipped without CUDA."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import vitpos
from vitpos.attention import attention
from vitpos.attention.policy import FLEX_PATHS, FUSED_PATHS

from ..conftest import TINY
from .test_kernel import qkv, random_terms, reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_flex_forward_and_backward_equal_the_reference():
    terms = random_terms(value=False, dtype=torch.float32, device="cuda")
    q, k, v = qkv(torch.float32, "cuda")
    zero_values = replace(terms, value_table=torch.zeros_like(terms.key_table))
    expected = reference(q, k, v, zero_values, 0.3)
    leaves = [q, k, v, *terms.tensors()]
    expected_grads = torch.autograd.grad(expected.sum(), leaves)
    out = attention(q, k, v, terms, scale=0.3, path="flex")
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    for got, want in zip(torch.autograd.grad(out.sum(), leaves), expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "relative", ["irpe:product:bias:k", "irpe:product:ctx:k", "irpe:product:ctx:qkv", "swin", "xl", "rope2d"]
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_training_steps_under_cuda_autocast(relative, dtype):
    model = vitpos.create_model("vit_lite_7_4", **TINY, absolute="none", relative=relative).cuda()
    x = torch.randn(2, 3, 32, 32, device="cuda")
    with torch.autocast("cuda", dtype=dtype):
        loss = model(x).float().square().mean()
    loss.backward()
    for name, p in model.named_parameters():
        if ".relative." in name:
            assert p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("path", FUSED_PATHS)
@pytest.mark.parametrize("spec_text", ["irpe:product:bias:qk", "irpe:product:ctx:k", "irpe:cross:ctx:qkv"])
def test_the_forced_fused_path_is_right_on_its_first_autotuned_call(spec_text, path, monkeypatch):
    """Ids built on the CPU (no device given), tables and queries on CUDA, a shape not tuned before."""
    from vitpos.attention.triton import launch, tuning

    monkeypatch.setattr(launch, "autotune_options", lambda: {"do_bench": tuning.brief_bench})  # no disk cache

    from .triton.literal import assert_relative, literal_attention
    from .triton.test_fused_terms import random_encoding

    grid, heads, head_dim = (7, 9), 2, 32
    n = 1 + grid[0] * grid[1]
    relative = random_encoding(spec_text, heads, head_dim, grid, 1).cuda()
    terms = relative.relative_terms(grid, 1)
    assert terms.ids is not None and terms.ids.device.type == "cpu"
    launch._tuned.cache_clear()  # a new tuning: the autotuner zeroes its buffers and reruns every kept tile size
    q, k, v = (torch.randn(3, heads, n, head_dim, device="cuda", requires_grad=True) for _ in range(3))
    leaves = [q, k, v, *relative.parameters()]
    out = attention(q, k, v, terms, scale=head_dim**-0.5, path=path)
    expected = literal_attention(q, k, v, terms.on(q.device), head_dim**-0.5)
    assert_relative(out, expected, 1e-4, "out")
    weight = torch.randn(out.shape, dtype=torch.float64, device="cuda")
    grads = torch.autograd.grad((out.double() * weight).sum(), leaves, retain_graph=True)
    for got, want in zip(grads, torch.autograd.grad((expected * weight).sum(), leaves), strict=True):
        assert_relative(got, want, 1e-5, "gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_compiled_rotation_equals_the_eager_one(dtype):
    from vitpos.attention.terms import Rotation

    cos_sin = torch.randn(2, 1, 12, 8, device="cuda")
    rotation = Rotation(cos_sin / cos_sin.square().sum(0).sqrt(), 1).to(dtype)
    q, k = (torch.randn(2, 3, 13, 16, device="cuda").to(dtype).requires_grad_() for _ in range(2))
    eager, compiled = rotation.apply(q, k), rotation.apply(q, k, compiled=True)
    weight = torch.randn(2, *q.shape, device="cuda")
    grads = [torch.autograd.grad((torch.stack(out).float() * weight).sum(), [q, k]) for out in (eager, compiled)]
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for got, want in zip((*compiled, *grads[1]), (*eager, *grads[0]), strict=True):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("path", FLEX_PATHS)
@pytest.mark.parametrize("case_id", ["irpe:cross:ctx:qk-dense bias", "swin-padding", "irpe:product:bias:qk-None"])
def test_compiled_flex_equals_the_literal_reference_for_bucketed_encodings(case_id, path):
    """Two bucket maps and a dense bias; a (heads, buckets) table with padded keys; a table shared by the heads."""
    from .test_flex_terms import CASES, HEAD_DIM, case_inputs
    from .triton.literal import assert_relative, literal_attention

    (case,) = (c for c in CASES if f"{c[0]}-{c[4]}" == case_id)
    q, k, v, terms, mask, leaves = case_inputs(case, "cuda", torch.float32)
    out = attention(q, k, v, terms, scale=HEAD_DIM**-0.5, mask=mask, path=path)
    expected = literal_attention(q, k, v, terms, HEAD_DIM**-0.5, mask)
    assert_relative(out, expected, 1e-4, "out")
    weight = torch.randn(out.shape, dtype=torch.float64, device="cuda")
    grads = torch.autograd.grad((out.double() * weight).sum(), leaves, retain_graph=True)
    for i, (got, want) in enumerate(zip(grads, torch.autograd.grad((expected * weight).sum(), leaves), strict=True)):
        assert_relative(got, want, 1e-4, f"gradient {i}")
