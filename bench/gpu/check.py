"""Part (i) of ``python -m bench.gpu --quick``: every bucketed encoding on every attention path against
its float64 literal reference, forward and every gradient, first and second call.

Each (case, path, precision) runs twice on a fresh copy of the layer. Before the first call every
Triton autotuner forgets its choices, so that call tunes as the first call of a new shape does
(autotuning reruns kernels and zeroes their ``reset_to_zero`` arguments); the second call reuses
the choice. Relative error of a tensor: max |difference| over max |reference|; a gradient whose
reference is near zero is measured against 1e-3 of the largest reference gradient. A row passes
below :data:`TOLERANCE` of its precision.
"""

from __future__ import annotations

import copy
import gc
import importlib.util
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from vitpos.attention import PATHS
from vitpos.attention.policy import FLEX_PATHS, FUSED_PATHS
from vitpos.models.layers import Attention

from ..quick_log import Budget, RowLog
from .check_layers import (
    CheckCase,
    CheckShape,
    build_layer,
    check_cases,
    num_tokens,
    reference_output,
    run_layer,
    token_mask,
)
from .taken_path import recording

TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2}
"""Largest relative error of a passing row: float32 arithmetic, or bf16 autocast (whose own
rounding of q, k, v and the logits gives errors of about 1e-2)."""
PART = "correctness"


@dataclass
class Expected:
    """A layer in float64 on the CPU, its input, loss weight, and the reference output and gradients."""

    layer: Attention
    x: torch.Tensor
    weight: torch.Tensor
    out: torch.Tensor
    grads: list[torch.Tensor]
    names: list[str]


def expected(case: CheckCase, shape: CheckShape) -> Expected:
    """The case's layer and its literal reference; the loss weight is zero at padded tokens. One CPU
    thread: the reference's many small operations run several times slower when threads contend."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _expected(case, shape)
    finally:
        torch.set_num_threads(threads)


def _expected(case: CheckCase, shape: CheckShape) -> Expected:
    layer = build_layer(case, shape)
    torch.manual_seed(1)
    x = torch.randn(shape.batch, num_tokens(case, shape), shape.dim, dtype=torch.float64, requires_grad=True)
    weight = torch.randn_like(x) * token_mask(case, shape)
    out = reference_output(layer, case, shape, x)
    names = ["x", *(name for name, _ in layer.named_parameters())]
    grads = torch.autograd.grad((out * weight).sum(), [x, *layer.parameters()], allow_unused=True)
    zeros = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, [x, *layer.parameters()], strict=True)]
    return Expected(layer, x.detach(), weight, out.detach() * token_mask(case, shape), zeros, names)


def relative_errors(got: list[torch.Tensor], want: list[torch.Tensor]) -> list[float]:
    """Per tensor: max |got - want| over max |want|, the latter at least 1e-3 of the largest |want|."""
    floor = 1e-3 * max(float(w.abs().max()) for w in want)
    errors = []
    for g, w in zip(got, want, strict=True):
        errors.append(float((g.detach().double().cpu() - w).abs().max()) / max(float(w.abs().max()), floor))
    return errors


def measure(ref: Expected, case: CheckCase, shape: CheckShape, layer: Attention, device, dtype: str) -> dict:
    """One call of ``layer`` (float32 on ``device``; bf16 under autocast) against ``ref``."""
    x = ref.x.to(device, torch.float32).requires_grad_()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
        out = run_layer(layer, case, shape, x)
    leaves = [x, *layer.parameters()]
    weight = ref.weight.to(device, torch.float32)
    grads = torch.autograd.grad((out.float() * weight).sum(), leaves, allow_unused=True)
    grads = tuple(torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves, strict=True))
    mask = token_mask(case, shape).to(device)
    out_error = relative_errors([out.float() * mask], [ref.out])[0]
    grad_errors = relative_errors(list(grads), ref.grads)
    worst = max(range(len(grad_errors)), key=grad_errors.__getitem__)
    return {
        "output_error": out_error,
        "gradient_error": grad_errors[worst],
        "worst_gradient": ref.names[worst],
        "pass": max(out_error, grad_errors[worst]) <= TOLERANCE[dtype],
    }


_TUNERS: weakref.WeakSet = weakref.WeakSet()


def track_tuning(device: torch.device) -> None:
    """From now on, know every Triton autotuner (those that exist and those made later), so that
    :func:`forget_tuning` can reach them; CUDA only (the interpreter takes fixed tiles)."""
    if device.type != "cuda" or importlib.util.find_spec("triton") is None:
        return
    from triton.runtime.autotuner import Autotuner

    if getattr(Autotuner.__init__, "tracked", False):
        return
    _TUNERS.update(obj for obj in gc.get_objects() if type(obj) is Autotuner)
    original = Autotuner.__init__

    def init(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        _TUNERS.add(self)

    init.tracked = True  # type: ignore[attr-defined]
    Autotuner.__init__ = init


def forget_tuning() -> None:
    """Make every tracked Triton autotuner forget its choices, in memory and on disk, so the next call
    tunes again."""
    for tuner in list(_TUNERS):
        tuner.cache.clear()
        tuner.cache_results = False


def plan() -> list[tuple[str, str | None]]:
    """(precision, forced path or None for the policy's) in the order they run: the policy's path and
    both fused variants in float32 and under bf16 autocast first, then the other paths in float32,
    FlexAttention last (it compiles a kernel for every case)."""
    first = [(dtype, path) for dtype in ("float32", "bfloat16") for path in (None, *FUSED_PATHS)]
    rest = sorted((p for p in PATHS if p not in FUSED_PATHS), key=lambda p: p in FLEX_PATHS)
    return first + [("float32", p) for p in rest]


def check_rows(shape: CheckShape, device: torch.device, budget: Budget, log: RowLog, cases=None) -> None:
    """Part (i): a row per call; what the part's time does not reach is one 'skipped' row."""
    cases = check_cases() if cases is None else cases
    references: dict[str, Expected] = {}
    track_tuning(device)
    runs = [(dtype, path, case) for dtype, path in plan() for case in cases]
    for done, (dtype, path, case) in enumerate(runs):
        if budget.left(PART) <= 0:
            log.add({"part": PART, "skipped": len(runs) - done, "reason": "its share of the time budget is spent"})
            budget.progress(f"{PART}: time spent, {len(runs) - done} runs skipped")
            return
        if case.label not in references:
            references[case.label] = expected(case, shape)
        ref = references[case.label]
        layer = copy.deepcopy(ref.layer).to(device=device, dtype=torch.float32)
        layer.path = path
        forget_tuning()
        for call in (1, 2):
            row = {"part": PART, "case": case.label, "path": path or "policy", "precision": dtype, "call": call}
            row.update(_measured(ref, case, shape, layer, device, dtype, path))
            row["elapsed_s"] = round(budget.elapsed(), 2)
            log.add(row)
            budget.progress(_describe(row))


def _measured(ref: Expected, case: CheckCase, shape: CheckShape, layer: Attention, device, dtype, path) -> dict:
    """:func:`measure` with the path the call took, or a failed row naming the exception (the check
    reports every path, failing or not)."""
    try:
        with recording(path) as taken:
            result = measure(ref, case, shape, layer, device, dtype)
    except Exception as err:
        return {"pass": False, "error": f"{type(err).__name__}: {err}"[:500]}
    return {"took": taken.label, **result}


def _describe(row: dict[str, Any]) -> str:
    head = f"{PART}: {row['case']} · {row['path']} · {row['precision']} · call {row['call']}"
    if "error" in row:
        return f"{head}: FAILED ({row['error'][:120]})"
    verdict = "pass" if row["pass"] else "FAIL"
    return (
        f"{head} (took {row['took']}): output {row['output_error']:.1e}, "
        f"gradient {row['gradient_error']:.1e} ({row['worst_gradient']}) {verdict}"
    )
