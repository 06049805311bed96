"""The fused kernels compile for an H100 (sm_90) down to a cubin with Triton's bundled ptxas, no GPU needed."""

from __future__ import annotations

import importlib.util
import os

import pytest

SIZES = ("H", "N", "M", "D", "NB")
FLOAT32 = ("LSE", "DELTA", "W", "DW", "DCOL", "DROW", "DBIAS")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="compiles, so not under the interpreter")
@pytest.mark.parametrize("dtype,maps", [("bf16", 1), ("fp32", 2)])
def test_kernels_compile_for_sm90(dtype, maps):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from vitpos.attention.triton import kernels

    flags = dict(
        NUM_MAPS=maps, HAS_ROW=True, HAS_COL=True, HAS_BIAS=True, VALUE=True, UPCAST=False, ONE_HOT=False,
        PRECISION="ieee" if dtype == "fp32" else "tf32", BLOCK_M=64, BLOCK_N=64, BLOCK_D=64, BLOCK_K=64,
        COL_GRAD=True, COL_MODE=kernels.STORE, ROW_GRAD=True, ROW_MODE=kernels.ATOMIC_SUM, BIAS_GRAD=True,
        BIAS_MODE=kernels.ATOMIC_ROWS,
    )  # fmt: skip
    for kernel in (kernels._forward_kernel, kernels._backward_kv_kernel, kernels._backward_q_kernel):
        names = kernel.arg_names
        constants = {name: value for name, value in flags.items() if name in names}
        signature = {
            name: "constexpr" if name in constants else "fp32" if name == "scale" else "*i8" if name == "IDS"
            else "*fp32" if name in FLOAT32 else f"*{dtype}" if name.isupper() and name not in SIZES else "i32"
            for name in names
        }  # fmt: skip
        source = ASTSource(kernel, signature, constexprs={(names.index(n),): v for n, v in constants.items()})
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
        assert compiled.asm["cubin"], kernel.__name__
