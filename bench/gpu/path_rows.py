"""Part (ii) of ``python -m bench.gpu --quick``, its first half: every bucketed term on every path that
computes it, side by side, as bf16 eager training steps over no PE.

Per token count and case (:data:`PATH_CASES`) the contenders (:func:`contenders`) each run a first call,
timed apart (it compiles FlexAttention or the rotation and tunes the fused kernels), then are timed
together in paired rounds against the no-PE step (:func:`bench.timing.paired_overheads`), then
their peak memory. A contender that cannot compute the step (the kernel falls back) gets a
'skipped' row. Each row names its path, whether it is the policy's default and whether it is the
case's fastest; ``python -m bench.quick_report ROWS.json --table`` turns the fastest into rows of
:data:`vitpos.attention.policy.CUDA_TABLE`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from vitpos.attention import kernel
from vitpos.attention.policy import CHUNK_FROM_TOKENS
from vitpos.models.layers import Attention

from ..cases import CASES, Case
from ..gpu_steps import bf16_step, peak_bytes
from .taken_path import recording

if TYPE_CHECKING:
    from ..quick_log import Budget, RowLog
    from ..quick_settings import QuickSettings

PART = "overhead"
SHAW = Case("Shaw", {"absolute": "none", "relative": "shaw"})
KINDS = {
    "iRPE bias product": "bias",
    "Swin bias": "bias",
    "Swin V2 cpb": "bias",
    "iRPE ctx k": "contextual",
    "iRPE ctx qk": "contextual",
    "iRPE ctx qkv": "values",
    "Shaw": "values",
    "RoPE 2-D": "rotation",
}
"""Each case's kind of term (:data:`vitpos.attention.policy.KINDS`): the row of the policy's table it informs."""
PATH_CASES: tuple[Case, ...] = (*(c for c in CASES if c.label in KINDS), SHAW)
"""The cases timed on every path, in the order they run."""


def contenders(case: Case, tokens: int, compiled: bool) -> list[str]:
    """The paths to time for ``case`` (for RoPE: how the rotation runs), the policy's likely default
    first; compiled ones only where ``compiled``. ``stored`` below the chunking length, ``chunked`` from it."""
    if KINDS.get(case.label) == "rotation":
        return ["eager", "compiled"] if compiled else ["eager"]
    bucketed = "chunked" if tokens + 1 >= CHUNK_FROM_TOKENS else "stored"
    paths = ["sdpa", bucketed, "triton", "flex"] if KINDS[case.label] != "values" else [bucketed, "triton"]
    return [p for p in paths if compiled or p != "flex"]


@contextmanager
def rotating(how: str) -> Iterator[None]:
    """Within: RoPE turns q and k ``how`` (eager or compiled), whatever the policy's table says."""
    original = kernel.rotation_path
    kernel.rotation_path = lambda device, dtype, tokens: how
    try:
        yield
    finally:
        kernel.rotation_path = original


def on_path(model: torch.nn.Module, case: Case, path: str, step: Callable[[], None]) -> Callable[[], None]:
    """``step`` with every attention call of ``model`` asking for ``path`` (RoPE: turning ``path``)."""
    if KINDS.get(case.label) == "rotation":

        def rotated() -> None:
            with rotating(path):
                step()

        return rotated
    for module in model.modules():
        if isinstance(module, Attention):
            module.path = path
    return step


def first_call(step: Callable[[], None], case: Case, path: str) -> tuple[float, str, bool]:
    """(seconds, the path the calls took, whether a forced path fell back) of the first call of ``step``."""
    forced = None if KINDS.get(case.label) == "rotation" else path
    start = time.perf_counter()
    with recording(forced) as taken:
        step()
    return time.perf_counter() - start, taken.label, taken.fell_back


def default_path(case: Case, model: torch.nn.Module, images: torch.Tensor) -> str:
    """The policy's path for ``case``'s bf16 training step (RoPE: the policy's rotation)."""
    if KINDS.get(case.label) == "rotation":
        return kernel.rotation_path(images.device.type, torch.bfloat16, 0)
    with recording() as taken, torch.autocast(images.device.type, dtype=torch.bfloat16):
        model(images[:1]).float().sum().backward()
    model.zero_grad(set_to_none=True)
    return taken.label


def path_rows(
    s: QuickSettings,
    budget: Budget,
    log: RowLog,
    head: dict[str, Any],
    images: torch.Tensor,
    base: tuple[Callable[[], None], int | None],
    build: Callable[[Case], torch.nn.Module],
    paired: Callable[[dict, str, int], dict[str, dict[str, Any]]],
) -> None:
    """Every case of :data:`PATH_CASES` on every contender at one token count (``head``'s)."""
    base_step, base_peak = base
    for case in PATH_CASES:
        if budget.left(PART) <= 0:
            log.add({**head, "part": PART, "skipped": f"{case.label} on every path", "reason": "time spent"})
            continue
        try:
            default = default_path(case, build(case), images)
        except ValueError as err:  # e.g. a head width RoPE cannot turn
            log.add({**head, "part": PART, "skipped": f"{case.label} on every path", "reason": str(err)})
            continue
        steps, rows = {}, {}
        for path in contenders(case, head["tokens"], s.compiled):
            if budget.left(PART) <= 0:  # the paths already run are still timed
                log.add({**head, "part": PART, "skipped": f"{case.label} · {path}", "reason": "time spent"})
                continue
            model = build(case)
            step = on_path(model, case, path, bf16_step(model, images, "train", False))
            seconds, took, fell_back = first_call(step, case, path)
            label = f"{case.label} · {path}"
            if fell_back:
                log.add({**head, "part": PART, "skipped": label, "reason": f"the path cannot compute it ({took} ran)"})
                continue
            steps[label] = step
            rows[label] = {**head, "part": PART, "case": case.label, "kind": KINDS[case.label], "path": path}
            rows[label] |= {"took": took, "default": path == default, "first_call_s": seconds}
        if not steps:
            continue
        timed = paired({"no PE": base_step, **steps}, "no PE", head["batch"])
        fastest = min(steps, key=lambda label: timed[label]["overhead"])
        for label, row in rows.items():
            peak = peak_bytes(steps[label], s.device)
            ratio = None if peak is None or not base_peak else peak / base_peak
            log.add(row | timed[label] | {"peak_bytes": peak, "peak_ratio": ratio, "fastest": label == fastest})
            mark = " (fastest)" if label == fastest else ""
            budget.progress(f"{PART}: {head['tokens']} tokens, {label}: {timed[label]['overhead']:+.1%}{mark}")
        del steps
