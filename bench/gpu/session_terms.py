"""Parts "terms-196" and "terms-784" of ``python -m bench.gpu --session``: every bucketed term on every
path and variant at one token count, each compiled just before it is timed.

Per contender (:func:`contenders`, in :func:`term_plan`'s order: the bare floor first, then the terms
the targets name) a fresh model is built, its first call is timed alone (FlexAttention, the compiled
rotation and the fused kernels compile or tune there), then its warm step is timed in paired
rounds against the no-PE step (:func:`bench.timing.paired_overheads`), then its peak memory; the
row is written before the next contender compiles. The floor row is the fused kernel with no term
against no PE on SDPA (its flash kernel on CUDA), so each term's cost reads against the kernel that
carries it. Dynamo is reset before every contender that compiles, and its recompile limit raised
with a hit made an error (:func:`configure_dynamo`), so no flex row silently runs uncompiled.

Where a path has no backward on the device (FlexAttention on a CPU) its row times the inference
step instead, FlexAttention compiled there too (:func:`flex_compiled_on`), against the no-PE inference
step (``step`` names which; such rows propose no policy row).
"""

from __future__ import annotations

import gc
import importlib.util
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from vitpos.attention import flex
from vitpos.attention.policy import CHUNK_FROM_TOKENS, FLEX_PATHS

from ..cases import BASELINE, Case
from ..gpu_steps import bf16_step, peak_bytes
from ..quick_log import spent
from .path_rows import KINDS, PATH_CASES, default_path, first_call, on_path

if TYPE_CHECKING:
    from ..quick_log import Budget, RowLog
    from ..quick_settings import QuickSettings

PART = "overhead"
"""The part name of the rows (that of the quick check's path rows: one report and one table reader)."""
FLOOR = "floor"
"""The kind of the bare floor row: no term, the fused kernel against SDPA."""
ORDER = (
    "iRPE ctx k",
    "iRPE bias product",
    "Swin bias",
    "iRPE ctx qkv",
    "RoPE 2-D",
    "iRPE ctx qk",
    "Shaw",
    "Swin V2 cpb",
)
"""The cases in the order they are timed: those the targets name first."""
RECOMPILE_LIMIT = 256
COMPILING = (*FLEX_PATHS, "compiled")


def contenders(case: Case, tokens: int) -> list[str]:
    """The paths and variants timed for ``case`` at ``tokens`` patch tokens (RoPE: how the rotation runs)."""
    kind = KINDS[case.label]
    if kind == "rotation":
        return ["eager", "compiled"]
    bucketed = "chunked" if tokens + 1 >= CHUNK_FROM_TOKENS else "stored"
    if kind == "values":
        return [bucketed, "triton", "triton_stored"]
    flex = list(FLEX_PATHS) if kind == "bias" else ["flex"]  # a gathered bias only where there is a table
    return ["sdpa", bucketed, "triton", "triton_stored", *flex]


def term_plan(tokens: int) -> list[tuple[Case, str]]:
    """(case, path) in the order they are timed: the floor, then every case of :data:`ORDER` on its contenders."""
    by_label = {c.label: c for c in PATH_CASES}
    return [(BASELINE, "triton")] + [
        (by_label[label], p) for label in ORDER for p in contenders(by_label[label], tokens)
    ]


DYNAMO = {
    "recompile_limit": RECOMPILE_LIMIT,
    "fail_on_recompile_limit_hit": True,
    "reset": "before every contender that compiles",
}
"""How the session keeps Dynamo from running a compiled path uncompiled (recorded in its JSON)."""


def configure_dynamo() -> None:
    """Raise Dynamo's recompile limit and make a hit an error (never a silent eager run), as :data:`DYNAMO` says."""
    config = torch._dynamo.config
    config.recompile_limit = DYNAMO["recompile_limit"]
    config.fail_on_recompile_limit_hit = DYNAMO["fail_on_recompile_limit_hit"]


def kind_of(case: Case) -> str:
    return FLOOR if case is BASELINE else KINDS[case.label]


def step_mode(path: str, device: torch.device) -> str:
    """``train``, or ``infer`` for a path without a backward on ``device`` (FlexAttention off CUDA)."""
    return "infer" if path in FLEX_PATHS and device.type != "cuda" else "train"


class Baselines:
    """The no-PE step per mode, built and first called on demand, its row logged once."""

    def __init__(self, s: QuickSettings, log: RowLog, head: dict, images: torch.Tensor, build) -> None:
        self.s, self.log, self.head, self.images, self.build = s, log, head, images, build
        self.steps: dict[str, tuple[Callable[[], None], int | None]] = {}

    def get(self, mode: str) -> tuple[Callable[[], None], int | None]:
        if mode not in self.steps:
            step = bf16_step(self.build(BASELINE), self.images, mode, False)
            start = time.perf_counter()
            step()
            seconds = time.perf_counter() - start
            peak = peak_bytes(step, self.s.device)
            self.log.add(
                {**self.head, "case": BASELINE.label, "step": mode, "first_call_s": seconds, "peak_bytes": peak}
            )
            self.steps[mode] = (step, peak)
        return self.steps[mode]


@contextmanager
def flex_compiled_on(device: torch.device) -> Iterator[None]:
    """Within: FlexAttention runs compiled on ``device`` too (a CPU times its compiled forward)."""
    added = device.type not in flex.COMPILED_ON
    flex.COMPILED_ON.add(device.type)
    try:
        yield
    finally:
        if added:
            flex.COMPILED_ON.discard(device.type)


def term_rows(s: QuickSettings, budget: Budget, log: RowLog, tokens: int, build, images: torch.Tensor, paired) -> None:
    """Every (case, path) of :func:`term_plan` at ``tokens``: a row each, written as soon as it is timed; a
    contender that fails gets a row saying how, and the next one runs."""
    head = {"part": PART, "model": s.model, "tokens": tokens, "batch": images.shape[0]}
    bases = Baselines(s, log, head, images, build)
    defaults: dict[str, str] = {}
    with flex_compiled_on(s.device):
        for case, path in term_plan(tokens):
            label = f"{case.label} · {path}"
            if spent(budget, log, PART, f"{tokens} tokens: {label}"):
                continue
            try:
                if case.label not in defaults:
                    defaults[case.label] = "sdpa" if case is BASELINE else default_path(case, build(case), images)
                row = _contender_row(s, head, bases, build, images, paired, case, path)
            except Exception as err:  # e.g. a head width RoPE cannot turn, a compile that fails
                log.add({**head, "skipped": label, "reason": f"{type(err).__name__}: {err}"[:500]})
                budget.progress(f"{PART}: {tokens} tokens, {label}: FAILED: {type(err).__name__}: {err}"[:300])
                continue
            if "skipped" in row:
                log.add(row)
                continue
            row["default"] = path == defaults[case.label]
            log.add(row)
            budget.progress(
                f"{PART}: {tokens} tokens, {label} ({row['step']}): first call {row['first_call_s']:.1f} s, "
                f"{row['overhead']:+.1%}"
            )
    tuning_rows(log, tokens, s.device)


def _contender_row(s: QuickSettings, head: dict, bases: Baselines, build, images, paired, case: Case, path: str):
    """One contender's row: first call alone (compiled just before), then the warm step paired against no PE."""
    label = f"{case.label} · {path}"
    mode = step_mode(path, s.device)
    base, base_peak = bases.get(mode)
    if path in COMPILING:
        torch._dynamo.reset()  # compiled just before it is timed, in a cache of its own
    model = build(case)
    step = on_path(model, case, path, bf16_step(model, images, mode, False))
    seconds, took, fell_back = first_call(step, case, path)
    if fell_back:
        return {**head, "skipped": label, "reason": f"the path cannot compute it ({took} ran)"}
    row = {**head, "case": case.label, "kind": kind_of(case), "path": path, "step": mode, "took": took}
    row |= {"first_call_s": seconds}
    row |= paired({BASELINE.label: base, label: step}, BASELINE.label, head["batch"])[label]
    peak = peak_bytes(step, s.device)
    row |= {"warm_step_s": head["batch"] / row["images_per_s"], "peak_bytes": peak}
    row["peak_ratio"] = None if peak is None or not base_peak else peak / base_peak
    return row


def tuning_rows(log: RowLog, tokens: int, device: torch.device) -> None:
    """A row per configuration the fused kernels' autotuners chose (CUDA): the evidence for pinning one
    configuration per kernel and GPU (:data:`vitpos.attention.triton.tuning.PINNED`)."""
    if device.type != "cuda" or importlib.util.find_spec("triton") is None:
        return
    from triton.runtime.autotuner import Autotuner

    from vitpos.attention.triton.kernels import TUNING
    from vitpos.attention.triton.tuning import capability

    def index(config) -> int | None:
        same = (config.kwargs, config.num_warps, config.num_stages)
        return next((i for i, c in enumerate(TUNING) if (c.kwargs, c.num_warps, c.num_stages) == same), None)

    gpu = list(capability(device))
    for tuner in (obj for obj in gc.get_objects() if type(obj) is Autotuner):
        for key, config in tuner.cache.items():
            row = {"part": "tuning", "tokens": tokens, "gpu": gpu, "kernel": tuner.base_fn.__name__}
            log.add(row | {"key": [str(k) for k in key], "config": index(config)})
