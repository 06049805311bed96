"""What the CUDA autotuner of the fused kernels benchmarks, and how long it spends on a new shape.

The first call of a new shape compiles every configuration it benchmarks (ptxas takes seconds for
each of these kernels), so the configurations are pruned per GPU by a measured table,
:data:`SPILL_FREE`: those that ptxas compiles without spilling registers to local memory
(``python -m bench.attention.fused_compile``, BENCHMARKS.md, "Fused attention kernels compiled for a GPU").
Each kept configuration is timed briefly (:func:`brief_bench`), and the tunings are cached on disk
next to Triton's compiled kernels (``cache_results``), so another process with the same kernels and
key tunes nothing. A tuning file that cannot be read (cut short, edited) would make Triton raise
on every launch of that shape: it is warned about once, removed, tuned again and written anew
(Triton writes it atomically) by :func:`tolerant_disk_cache`. The key holds sizes rounded up to
powers of two (:mod:`.launch`), so another batch size in the same rounded key reuses a tuning and
its compiled kernels (Triton specialises integers on divisibility by 16, which every rounded size
from 16 on shares).
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from types import TracebackType

import torch
import triton
from triton.runtime.autotuner import Autotuner

from .kernels import TUNING

__all__ = [
    "SPILL_FREE",
    "UNMEASURED",
    "PINNED",
    "capability",
    "configs_for",
    "brief_bench",
    "autotune_options",
    "tolerant_disk_cache",
]

SPILL_FREE: dict[tuple[int, int], dict[str, tuple[int, ...]]] = {
    (9, 0): {"_forward_kernel": (0, 1), "_backward_kv_kernel": (0, 1, 3), "_backward_q_kernel": (0, 1)},
}
"""{GPU compute capability: {kernel: indices into :data:`.kernels.TUNING`}}: the configurations that
ptxas compiles without spills for that GPU (sm_90: H100, H200; bf16, head width 64, every term on)."""

UNMEASURED = (0, 1)
"""The configurations benchmarked on a GPU that :data:`SPILL_FREE` does not list: sm_90's spill-free pair."""

PINNED: dict[tuple[int, int], dict[str, int]] = {}
"""{GPU compute capability: {kernel: index into :data:`.kernels.TUNING`}}: the one configuration a
kernel runs on that GPU without tuning, so a cold first call compiles one configuration per kernel.
A kernel is pinned only where a GPU session's autotuner chose the same configuration at every shape
it timed (``python -m bench.gpu --session``; ``python -m bench.quick_report ROWS.json --table``
prints the entries). No session has pinned one yet: every kernel takes the pruned autotune."""

BENCH_WARMUP_MS, BENCH_REP_MS = 5, 20
"""The time given to each configuration of a tuning (Triton's default is 25 ms and 100 ms)."""


def capability(device: torch.device) -> tuple[int, int]:
    """The compute capability of a CUDA ``device``; (0, 0) elsewhere (the interpreter)."""
    return torch.cuda.get_device_capability(device) if device.type == "cuda" else (0, 0)


def configs_for(kernel_name: str, gpu: tuple[int, int]) -> list[triton.Config]:
    """The configurations the autotuner benchmarks for ``kernel_name`` on a GPU of capability ``gpu``: the
    pinned one alone (``triton.autotune`` then benchmarks nothing), else those that compile without spills."""
    pinned = PINNED.get(gpu, {}).get(kernel_name)
    if pinned is not None:
        return [TUNING[pinned]]
    return [TUNING[i] for i in SPILL_FREE.get(gpu, {}).get(kernel_name, UNMEASURED)]


def brief_bench(kernel_call, quantiles):
    """``triton.testing.do_bench`` with :data:`BENCH_WARMUP_MS` and :data:`BENCH_REP_MS`."""
    return triton.testing.do_bench(kernel_call, warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS, quantiles=quantiles)


def autotune_options() -> dict:
    """The options of ``triton.autotune`` above that this Triton's autotuner takes (both from Triton 3.2 on)."""
    wanted = {"do_bench": brief_bench, "cache_results": True}
    accepted = inspect.signature(Autotuner.__init__).parameters
    return {name: value for name, value in wanted.items() if name in accepted}


def _tuning_file(tb: TracebackType | None) -> Path | None:
    """The tuning file Triton's ``check_disk_cache`` was reading where the traceback ``tb`` ends (None: another
    failure)."""
    found = None
    while tb is not None:
        path = tb.tb_frame.f_locals.get("path") if tb.tb_frame.f_code.co_name == "check_disk_cache" else None
        if isinstance(path, str) and path.endswith(".autotune.json"):
            found = Path(path)
        tb = tb.tb_next
    return found


def tolerant_disk_cache(tuner: Autotuner) -> Autotuner:
    """``tuner`` whose unreadable tuning file is warned about, removed, tuned again and rewritten (see the module
    docstring); every other error is Triton's own."""
    read = tuner.check_disk_cache

    def check_disk_cache(tuning_key, configs, bench_fn):
        try:
            return read(tuning_key, configs, bench_fn)
        except (ValueError, KeyError, TypeError) as err:  # json.JSONDecodeError is a ValueError
            path = _tuning_file(err.__traceback__)
            if path is None:
                raise
            warnings.warn(
                f"the kernel tuning file {path} cannot be read ({type(err).__name__}: {err}); tuning that shape again "
                "and writing the file anew",
                RuntimeWarning,
                stacklevel=2,
            )
            path.unlink(missing_ok=True)
            return read(tuning_key, configs, bench_fn)

    tuner.check_disk_cache = check_disk_cache
    return tuner
