"""The CUDA paths (FlexAttention forward and backward, autocast training); skipped without CUDA."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import vitpos
from vitpos.attention import attention

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
