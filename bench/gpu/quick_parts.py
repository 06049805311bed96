"""Parts (ii) to (iv) of ``python -m bench.gpu --quick``: training-step overheads (every bucketed term on
every path, :mod:`bench.gpu.path_rows`), compiled and Swin models against timm's; one JSON row per
measurement (parts (v) and (vi), the data pipeline's, are in :mod:`bench.gpu.quick_data`).

Every timing is paired (:func:`bench.timing.paired_overheads`: the baseline timed between the rounds
of the case) and synchronised; a row also names the attention path its model's calls took. A part
whose share of the time is spent writes one 'skipped' row saying how much it left out.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import torch

import vitpos

from ..cases import BASELINE, Case
from ..gpu_steps import bf16_step, peak_bytes
from ..quick_log import Budget, RowLog, skip, spent
from ..quick_settings import MODEL, QuickSettings
from ..timing import image_side, interleaved_throughput, paired_overheads
from .path_rows import KINDS, path_rows
from .report import gpu_cases
from .taken_path import recording

SWIN = ("swin_tiny", "swin_tiny_patch4_window7_224")
"""vitpos's Swin-T and the timm model it is timed against."""
COMPILED_CASE = Case("iRPE ctx k", {"absolute": "none", "relative": "irpe:product:ctx:k"})


def _build(s: QuickSettings, model: str, slots: dict, tokens: int) -> torch.nn.Module:
    args = s.model_args if model == s.model else {}
    return vitpos.create_model(model, img_size=image_side(model, tokens), **args, **slots).to(s.device)


def _images(s: QuickSettings, model: str, tokens: int, batch: int) -> torch.Tensor:
    side = image_side(model, tokens)
    return torch.randn(batch, 3, side, side, device=s.device)


def _paired_all(s: QuickSettings, steps: dict, baseline: str, batch: int) -> dict[str, dict[str, Any]]:
    """Per step but the baseline: images/s of it and of the baseline, and its time over the baseline's, paired."""
    throughput, overheads = paired_overheads(steps, baseline, batch, warmup=1, repeats=s.repeats, iters=s.iters)
    return {
        case: {
            "images_per_s": throughput[case].median,
            "baseline_images_per_s": throughput[baseline].median,
            "overhead": overheads[case].median,
            "overhead_low": overheads[case].low,
            "overhead_high": overheads[case].high,
        }
        for case in steps
        if case != baseline
    }


def _paired(s: QuickSettings, steps: dict, baseline: str, batch: int) -> dict[str, Any]:
    """Images/s of both steps and the case's time over the baseline's, paired."""
    (row,) = _paired_all(s, steps, baseline, batch).values()
    return row


def _baseline(s: QuickSettings, log: RowLog, head: dict[str, Any], images: torch.Tensor):
    """The no-PE step at one token count, timed alone and logged: (step, images/s, peak bytes)."""
    torch.manual_seed(0)
    step = bf16_step(_build(s, s.model, BASELINE.position, head["tokens"]), images, "train", False)
    with recording() as taken:
        step()
    timing = interleaved_throughput({"base": step}, head["batch"], warmup=0, repeats=s.repeats, iters=s.iters)
    rate, peak = timing["base"].median, peak_bytes(step, s.device)
    log.add({**head, "case": BASELINE.label, "took": taken.label, "images_per_s": rate, "peak_bytes": peak})
    return step, rate, peak


def overhead_rows(s: QuickSettings, budget: Budget, log: RowLog) -> dict[int, float]:
    """Part (ii): bf16 eager training steps over no PE at every token count: every bucketed term on
    every path (:mod:`bench.gpu.path_rows`), then every other slot value on its default path. Returns
    the baseline's images/s per token count."""
    part, rates, bases = "overhead", {}, {}
    for tokens in s.tokens:
        if spent(budget, log, part, f"{tokens} tokens"):
            continue
        batch = max(1, s.batch * 196 // max(tokens, 196))
        images = _images(s, s.model, tokens, batch)
        head = {"part": part, "model": s.model, "tokens": tokens, "batch": batch}
        base, rates[tokens], base_peak = _baseline(s, log, head, images)
        bases[tokens] = (head, images, base, base_peak)
        budget.progress(f"{part}: {tokens} tokens, {BASELINE.label}: {rates[tokens]:.1f} img/s")
        build = functools.partial(_build_case, s, tokens)
        path_rows(s, budget, log, head, images, (base, base_peak), build, functools.partial(_paired_all, s))
    for tokens, (head, images, base, base_peak) in bases.items():
        cases = [c for c in gpu_cases() if c is not BASELINE and c.label not in KINDS]
        for i, case in enumerate(cases):
            if spent(budget, log, part, f"{tokens} tokens: {len(cases) - i} slot values"):
                break
            try:
                model = _build(s, s.model, case.position, tokens)
            except ValueError as err:  # e.g. PEG after a block a shallow test model lacks
                skip(log, budget, part, f"{tokens} tokens: {case.label}", str(err))
                continue
            step = bf16_step(model, images, "train", False)
            with recording() as taken:
                step()  # compiles and tunes whatever the case's path needs, outside the timing
            row = {**head, "case": case.label, "slots": case.slots, "took": taken.label}
            row |= _paired(s, {BASELINE.label: base, case.label: step}, BASELINE.label, head["batch"])
            peak = peak_bytes(step, s.device)
            row |= {"peak_bytes": peak, "peak_ratio": None if peak is None or not base_peak else peak / base_peak}
            log.add(row)
            budget.progress(f"{part}: {tokens} tokens, {case.label} ({taken.label}): {row['overhead']:+.1%}")
            del model, step  # one case's model and optimiser state on the device at a time
    return rates


def _build_case(s: QuickSettings, tokens: int, case: Case) -> torch.nn.Module:
    return _build(s, s.model, case.position, tokens)


def _timm(name: str, s: QuickSettings) -> torch.nn.Module:
    import timm

    return timm.create_model(name).to(s.device)


def _timm_missing() -> str | None:
    return None if importlib.util.find_spec("timm") is not None else "timm does not import here"


def eager_path(model: torch.nn.Module, images: torch.Tensor) -> str:
    """The attention path of an eager bf16 training step of ``model`` on ``images`` (gradients dropped)."""
    with recording() as taken, torch.autocast(images.device.type, dtype=torch.bfloat16):
        model(images).float().sum().backward()
    model.zero_grad(set_to_none=True)
    return taken.label


def compiled_rows(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    """Part (iii): DeiT-S with iRPE ctx k against timm's DeiT-S (without timm: against no PE),
    both compiled (eager if ``s.compiled`` is off), bf16 training steps at the first token count."""
    part, tokens = "compiled", s.tokens[0]
    timm_deit = s.model == MODEL and _timm_missing() is None
    against = f"timm {MODEL}" if timm_deit else f"vitpos {s.model} {BASELINE.label}"
    if spent(budget, log, part, f"{COMPILED_CASE.label} against {against}"):
        return
    images = _images(s, s.model, tokens, s.batch)
    theirs = _timm(MODEL, s) if timm_deit else _build(s, s.model, BASELINE.position, tokens)
    ours = _build(s, s.model, COMPILED_CASE.position, tokens)
    took = eager_path(ours, images[:2])  # outside the compiled graphs, which must not trace the recorder
    steps = {
        against: bf16_step(theirs, images, "train", s.compiled),
        COMPILED_CASE.label: bf16_step(ours, images, "train", s.compiled),
    }
    first_call = []
    for label, step in steps.items():
        if spent(budget, log, part, f"{COMPILED_CASE.label} against {against} (compiling {label})"):
            return
        start = budget.elapsed()
        step()
        first_call.append(f"{label} {budget.elapsed() - start:.1f} s")
    row = {"part": part, "case": COMPILED_CASE.label, "against": against, "compiled": s.compiled, "tokens": tokens}
    row |= {"batch": s.batch, "took": took, "first_calls": ", ".join(first_call)}
    row |= _paired(s, steps, against, s.batch)
    log.add(row)
    budget.progress(f"{part}: {COMPILED_CASE.label} ({row['took']}) against {against}: {row['overhead']:+.1%}")


def swin_rows(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    """Part (iv): vitpos's swin_tiny (its default relative bias) against timm's Swin-T, eager bf16
    training steps at 224 px."""
    part, (ours, theirs) = "swin", SWIN
    missing = _timm_missing()
    if missing is not None:
        return skip(log, budget, part, f"{ours} against timm {theirs}", missing)
    if spent(budget, log, part, f"{ours} against timm {theirs}"):
        return None
    images = torch.randn(s.batch, 3, 224, 224, device=s.device)
    steps = {
        f"timm {theirs}": bf16_step(_timm(theirs, s), images, "train", False),
        f"vitpos {ours}": bf16_step(vitpos.create_model(ours).to(s.device), images, "train", False),
    }
    with recording() as taken:
        steps[f"vitpos {ours}"]()
    row = {"part": part, "case": f"vitpos {ours}", "against": f"timm {theirs}", "batch": s.batch, "took": taken.label}
    row |= _paired(s, steps, f"timm {theirs}", s.batch)
    log.add(row)
    budget.progress(f"{part}: vitpos {ours} ({taken.label}) against timm {theirs}: {row['overhead']:+.1%}")
    return None
