"""Whether a training run of the study can carry a verdict: it converged, and it left chance.

A run trains until its validation metric stops improving (the patience rule of
:class:`~vitpos.engine.ensemble.Stopping`) or its task is solved, within a cap of optimiser steps.
It is *flagged* when it ended at the cap still improving, or when it stayed at chance: its final
training metric and its best validation metric both within 10 points of 100/classes (accuracy), or
below an R² of 0.1. Such a run says nothing about the encoding, only that this optimisation did not
find a solution. (The training metric is a running mean over the run's last epoch, so a run solved
within that epoch can show a low one; its validation metric tells it apart.)

A run *stopped short* when both metrics stayed below the level at which the task counts as learned
(:data:`LEARNED`): it neither fitted its own training images nor generalised, so its optimiser stopped
on a plateau (at chance, or part-way, such as an R² near 0.5 with one of the offset's two components
found). Where another seed of the same family, task and training set learned the task, such a run is a
failure of that optimisation (:func:`~.claims.failed_seeds`); a run that fitted its training images
but not its test images is a result and always counts.
"""

from __future__ import annotations

import math
from typing import Any

from ..tasks.chance import CHANCE_MARGIN, CHANCE_R2, at_chance

__all__ = [
    "CHANCE_MARGIN",
    "CHANCE_R2",
    "at_chance",
    "stayed_at_chance",
    "is_at_chance",
    "has_learned",
    "stopped_short",
    "LEARNED",
    "is_flagged",
    "run_record",
]

LEARNED = {"acc1": 90.0, "r2": 0.8}
"""Best validation metric at which a run has learned its task (the claims' "learns" bounds)."""


def stayed_at_chance(curve: list[list], metric: str, classes: int) -> bool:
    """Whether a run's final training metric and its best validation metric are both at chance."""
    vals = [row[3] for row in curve if row[3] is not None]
    return at_chance(metric, curve[-1][2], classes) and at_chance(metric, max(vals, default=curve[-1][2]), classes)


def is_at_chance(record: dict[str, Any]) -> bool:
    """Whether a stored cell's run stayed at chance (recomputed from its curve)."""
    if "curve" not in record:
        return bool(record.get("at_chance", False))
    metric = "acc1" if record["metric"] == "accuracy" else "r2"
    return stayed_at_chance(record["curve"], metric, record.get("classes", 2))


def has_learned(record: dict[str, Any]) -> bool:
    """Whether a stored cell's run reached :data:`LEARNED` on its validation split at some epoch."""
    metric = "acc1" if record.get("metric") == "accuracy" else "r2"
    vals = [row[3] for row in record.get("curve", []) if row[3] is not None]
    return max(vals, default=-math.inf) >= LEARNED[metric]


def stopped_short(record: dict[str, Any]) -> bool:
    """Whether a stored cell's final training metric and best validation metric both stayed below :data:`LEARNED`."""
    metric = "acc1" if record.get("metric") == "accuracy" else "r2"
    if "curve" not in record:
        return bool(record.get("at_chance", False))
    curve = record["curve"]
    vals = [row[3] for row in curve if row[3] is not None]
    return curve[-1][2] < LEARNED[metric] and max(vals, default=curve[-1][2]) < LEARNED[metric]


def is_flagged(record: dict[str, Any]) -> bool:
    """Whether a stored cell's run is flagged (recomputed from its curve, so a report applies this rule)."""
    if "curve" not in record:
        return bool(record.get("flagged", False))
    return record["stop"] == "cap" or is_at_chance(record)


def run_record(history: list[dict[str, Any]], metric: str, classes: int) -> dict[str, Any]:
    """What a cell stores about its training: steps, stop reason, final training loss and metric, the
    flags, the steps at the first cap of a run trained again under a longer one (else None), and the curve
    (step, train loss, train metric, val metric) per epoch."""
    last = history[-1]
    train_metric = last[f"train_{metric}"]
    stop = last.get("stop", "cap")
    curve = [[row["step"], row["train_loss"], row[f"train_{metric}"], row.get(f"val_{metric}")] for row in history]
    chance = stayed_at_chance(curve, metric, classes)
    return {
        "steps": last["step"],
        "stop": stop,
        "best_epoch": last.get("best_epoch", last["epoch"]),
        "converged": stop != "cap",
        "at_chance": chance,
        "flagged": stop == "cap" or chance,
        "extended_from": last.get("extended_from"),
        "train_loss": last["train_loss"],
        "train_metric": train_metric,
        "classes": classes,
        "curve": curve,
    }
