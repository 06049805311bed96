"""``python -m bench.attention.fused_compile``: the fused attention kernels compiled for an NVIDIA GPU, without one.

Triton's own compiler builds the forward, dK/dV and dQ kernels of :mod:`vitpos.attention.triton`
for a target (default sm_90, an H100) at every tile configuration the CUDA autotuner may pick,
down to a cubin with the ptxas that Triton bundles, and this reports what ptxas reports:
registers per thread and bytes spilled to local memory, with the shared memory of each kernel.
Spills slow a kernel; which configuration is fastest stays a question for a GPU
(``python -m bench.gpu``). ``--out BENCHMARKS.md`` replaces this section of that file.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from ..gpu.report import replace_section

HEADING = "## Fused attention kernels compiled for a GPU (no GPU needed)"
SIZES = ("H", "N", "M", "D", "NB")
FLOAT32 = ("LSE", "DELTA", "W", "DW", "DCOL", "DROW", "DBIAS")


def flags(dtype: str, maps: int, block_m: int, block_n: int, head_dim: int = 64) -> dict:
    """Every constexpr of the kernels for one call: all terms on, every gradient wanted."""
    from vitpos.attention.triton import kernels

    return dict(
        NUM_MAPS=maps, HAS_ROW=True, HAS_COL=True, HAS_BIAS=True, VALUE=True, UPCAST=False,
        PRECISION="ieee" if dtype == "fp32" else "tf32", BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=head_dim,
        COL_GRAD=True, ROW_GRAD=True, BIAS_GRAD=True, BIAS_MODE=kernels.ATOMIC_ROWS,
    )  # fmt: skip


def compile_kernels(constants: dict, dtype: str, arch: int, num_warps: int, num_stages: int) -> dict:
    """The three kernels compiled for ``sm_<arch>``: {name: Triton's compiled kernel}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from vitpos.attention.triton import kernels

    compiled = {}
    for kernel in (kernels._forward_kernel, kernels._backward_kv_kernel, kernels._backward_q_kernel):
        names = kernel.arg_names
        own = {name: value for name, value in constants.items() if name in names}
        signature = {
            name: "constexpr" if name in own else "fp32" if name == "scale" else "*i8" if name == "IDS"
            else "*fp32" if name in FLOAT32 else f"*{dtype}" if name.isupper() and name not in SIZES else "i32"
            for name in names
        }  # fmt: skip
        source = ASTSource(kernel, signature, constexprs={(names.index(n),): v for n, v in own.items()})
        options = {"num_warps": num_warps, "num_stages": num_stages}
        compiled[kernel.__name__.strip("_")] = triton.compile(
            source, target=GPUTarget("cuda", arch, 32), options=options
        )
    return compiled


def ptxas_report(ptx: str, arch: int) -> dict[str, int]:
    """Registers and spilled bytes that ptxas reports for ``ptx``."""
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.ptx")
        Path(path).write_text(ptx)
        suffix = "a" if arch >= 90 else ""
        text = subprocess.run(
            [str(ptxas), "-v", f"--gpu-name=sm_{arch}{suffix}", "-o", os.devnull, path],
            capture_output=True, text=True, check=True,
        ).stderr  # fmt: skip

    def number(pattern: str) -> int:
        found = re.search(pattern, text)
        return int(found.group(1)) if found else 0

    return {
        "registers": number(r"Used (\d+) registers"),
        "spill stores": number(r"(\d+) bytes spill stores"),
        "spill loads": number(r"(\d+) bytes spill loads"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.attention.fused_compile", description=__doc__)
    p.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90 (H100, H200) or 80 (A100)")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--out", default="", help="replace this section of the markdown file")
    args = p.parse_args(argv)
    import triton

    from vitpos.attention.triton.kernels import TUNING

    lines = [
        "| BLOCK_M × BLOCK_N, warps | kernel | registers | spill stores / loads (bytes) | shared memory |",
        "| --- | --- | --- | --- | --- |",
    ]
    for config in TUNING:
        m, n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        compiled = compile_kernels(
            flags(args.dtype, 1, m, n), args.dtype, args.arch, config.num_warps, config.num_stages
        )
        for name, kernel in compiled.items():
            r = ptxas_report(kernel.asm["ptx"], args.arch)
            lines.append(
                f"| {m} × {n}, {config.num_warps} | {name} | {r['registers']} | "
                f"{r['spill stores']} / {r['spill loads']} | {kernel.metadata.shared / 1024:.0f} KiB |"
            )
        print(lines[-3], lines[-2], lines[-1], sep="\n", flush=True)
    command = shlex.join(
        ["python", "-m", "bench.attention.fused_compile", *(argv if argv is not None else sys.argv[1:])]
    )
    section = "\n".join([
        HEADING, "",
        f"`{command}` — Triton {triton.__version__} for sm_{args.arch}, {args.dtype} inputs, head dim 64, "
        "one bucket-id map (the bucket count is a run-time size), every term on (bias and contextual on q "
        "and k, value term, a dense bias) and every gradient wanted; the tile configurations are those the "
        "CUDA autotuner chooses from. Compiled on a machine without a GPU: no time is measured here.", "",
        *lines,
    ])  # fmt: skip
    print(section)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text(), section + "\n", HEADING))
    return 0


if __name__ == "__main__":
    sys.exit(main())
