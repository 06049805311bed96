"""The fused kernels compile for an H100 (sm_90) down to a cubin with Triton's bundled ptxas, no GPU needed."""

from __future__ import annotations

import importlib.util
import os

import pytest


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="compiles, so not under the interpreter")
@pytest.mark.parametrize("dtype,maps", [("bf16", 1), ("fp32", 2)])
def test_kernels_compile_for_sm90(dtype, maps):
    from bench.attention.fused_compile import compile_kernels, flags

    compiled = compile_kernels(flags(dtype, maps, 64, 32), dtype, 90, num_warps=8, num_stages=2)
    assert set(compiled) == {"forward_kernel", "backward_kv_kernel", "backward_q_kernel"}
    assert all(kernel.asm["cubin"] for kernel in compiled.values())
