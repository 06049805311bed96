"""Part (vii) of ``python -m bench.gpu --quick``: the study's stacked ensembles on the device.

Rows, in the order they are measured (each part of the budget spent writes a 'skipped' row):
member steps/s of the ``--full`` study model (32 px, batch 64) eager at stacks of 1, 10, 30 and all
of a family's members (:data:`MEMBERS`, ``--ensemble-members``); stacks of 30 in flight on CUDA
streams; the other default families at 10 and 30; the projected ``--full`` training time
(:func:`bench.ensemble_rate.projected_seconds`) over the families measured; the projected
``--task detect`` and ``--task segment`` training times (:mod:`bench.dense_cost`); last, the
compiled step (CUDA graphs on CUDA) against the eager one at 30, paired, with its first call, and the
``--full`` projection it implies with every graph the study compiles charged at that first call. Every
rate row counts the operations a step dispatches per member step (:mod:`vitpos.engine.dispatch`).
"""

from __future__ import annotations

import torch

from vitpos.config import HostConfig
from vitpos.study.families import DEFAULT_FAMILIES
from vitpos.study.protocol import StudyConfig

from .dense_cost import DENSE, projection_row
from .ensemble_rate import (
    SEQUENTIAL,
    Fit,
    all_members,
    fit,
    in_flight_rows,
    projected_seconds,
    rate_rows,
    step_graphs,
)
from .quick_log import Budget, RowLog, spent
from .quick_settings import QuickSettings

PART = "ensemble"
FIRST = "learned"
"""The family measured at every stack size, in flight and compiled."""
MEMBERS = "1,10,30,all"
"""The stack sizes of the first family (``all``: every training of its ``--full`` cells)."""
OTHERS = (10, 30)
"""The stack sizes of the other families (enough for the fit of the projection; at most the largest of the
first family's)."""


def _sizes(text: str, full: StudyConfig, label: str) -> list[int]:
    return [all_members(full, label) if s == "all" else int(s) for s in text.split(",") if s]


def ensemble_rows(s: QuickSettings, budget: Budget, log: RowLog, members: str = MEMBERS) -> None:
    """Part (vii): stacked study models' member steps/s, stacks in flight, projections, the compiled step."""
    full = StudyConfig.full()
    batch = min(s.batch, full.batch_size)
    head = {"part": PART, "img_size": full.model.image_hw[0], "batch": batch}
    first = next(f for f in DEFAULT_FAMILIES if f.label == FIRST)
    model_cfg = first.model_config(full.model, num_classes=2)
    rates: dict[str, dict[int, float]] = {}
    sizes = _sizes(members, full, first.label)
    for size in sizes:
        if spent(budget, log, PART, f"{first.label} at {size} members"):
            return
        (row,) = rate_rows(model_cfg, batch, size, s.device, ("off",), s.repeats, s.iters)
        rates.setdefault(first.label, {})[size] = row["member_steps_per_s"]
        log.add({**head, "family": first.label, **row})
        budget.progress(f"{PART}: {first.label}, {size} members: {row['member_steps_per_s']:.0f} member steps/s")
    flight_size = min(30, max(sizes))
    gain = 1.0
    if not spent(budget, log, PART, f"stacks of {flight_size} in flight"):
        flight = in_flight_rows(model_cfg, batch, flight_size, s.device, (1, 2, 4), s.iters)
        for row in flight:
            log.add({**head, "family": first.label, **row})
        if flight[0]["how"] != SEQUENTIAL:
            gain = max(r["member_steps_per_s"] for r in flight) / flight[0]["member_steps_per_s"]
        budget.progress(f"{PART}: in flight: " + ", ".join(f"{r['member_steps_per_s']:.0f}" for r in flight))
    others = [n for n in OTHERS if n <= max(sizes)] or [max(sizes)]
    for family in (f for f in DEFAULT_FAMILIES if f is not first):
        if spent(budget, log, PART, f"{family.label} at {', '.join(map(str, others))} members"):
            break
        cfg = family.model_config(full.model, num_classes=2)
        for size in others:
            (row,) = rate_rows(cfg, batch, size, s.device, ("off",), s.repeats, s.iters)
            rates.setdefault(family.label, {})[size] = row["member_steps_per_s"]
            log.add({**head, "family": family.label, **row})
        budget.progress(f"{PART}: {family.label}: measured")
    fits = {label: fit(r) for label, r in rates.items()}
    log.add(_projection(head, fits, full, gain, "off"))
    for task in DENSE:
        if spent(budget, log, PART, f"the --task {task} projection"):
            continue
        log.add({**head, **projection_row(task, str(s.device), batch=s.batch)})
        budget.progress(f"{PART}: --task {task} projected")
    _compiled(s, budget, log, head, model_cfg, batch, flight_size, fits, full, gain)


def _projection(head: dict, fits: dict[str, Fit], full: StudyConfig, gain: float, mode: str) -> dict:
    minutes = projected_seconds(fits, full) / 60
    return {
        **head,
        "projection": "--full training",
        "compile": mode,
        "families": sorted(fits),
        "of": len(full.families),
        "one_at_a_time_min": minutes,
        "in_flight_gain": gain,
        "projected_min": minutes / gain,
        "how": "every stack at its cap; evaluation, probes and start-up aside",
    }


def _compiled(
    s: QuickSettings,
    budget: Budget,
    log: RowLog,
    head: dict,
    model_cfg: HostConfig,
    batch: int,
    size: int,
    fits: dict[str, Fit],
    full: StudyConfig,
    gain: float,
) -> None:
    """The compiled step against the eager one at ``size`` members, and the projection it implies."""
    mode = "reduce-overhead" if s.device.type == "cuda" else "default"
    if not s.compiled:
        log.add({"part": PART, "skipped": f"the compiled step ({mode})", "reason": "--no-compile"})
        return
    if spent(budget, log, PART, f"the compiled step ({mode}) at {size} members"):
        return
    rows = rate_rows(model_cfg, batch, size, s.device, ("off", mode), s.repeats, s.iters)
    for row in rows:
        log.add({**head, "family": FIRST, **row})
    speedup = rows[1]["speedup_over_off"]
    graphs = step_graphs(full)
    compiling = graphs * rows[1]["first_call_s"] / 60  # every graph of the study, at this one's first call
    row = _projection(head, fits, full, gain, mode)
    row |= {
        "one_at_a_time_min": projected_seconds(fits, full, compiled=True) / 60 / speedup + compiling,
        "projected_min": projected_seconds(fits, full, compiled=True) / 60 / gain / speedup + compiling,
        "graphs": graphs,
        "compile_min": compiling,
        "how": row["how"] + f"; stacks padded to their bucket, eager ÷ ×{speedup:.2f} at {size}, "
        f"plus {graphs} graphs compiled at {rows[1]['first_call_s']:.0f} s each",
    }
    log.add(row)
    budget.progress(f"{PART}: compiled ({mode}) at {size}: ×{speedup:.2f} over eager")
    torch.compiler.reset()
