"""Whether a training run of the study can carry a verdict: it converged, and it left chance.

A run trains until its validation metric stops improving (the patience rule of
:class:`~vitpos.engine.ensemble.Stopping`) or its task is solved, within a cap of optimiser steps.
It is *flagged* when it ended at the cap still improving, or when its training metric stayed at
chance (accuracy within 10 points of 100/classes, or R² below 0.1): such a run says nothing about
the encoding, only that this optimisation did not find a solution.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHANCE_MARGIN", "CHANCE_R2", "at_chance", "run_record"]

CHANCE_MARGIN = 10.0
"""Points above chance (100 / classes) within which a training accuracy counts as chance."""
CHANCE_R2 = 0.1
"""Training R² below which a regression run counts as chance."""


def at_chance(metric: str, value: float, classes: int) -> bool:
    """Whether a training ``value`` of ``metric`` (``acc1`` in %, or ``r2``) is at chance."""
    if metric == "acc1":
        return value < 100.0 / classes + CHANCE_MARGIN
    return value < CHANCE_R2


def run_record(history: list[dict[str, Any]], metric: str, classes: int) -> dict[str, Any]:
    """What a cell stores about its training: steps, stop reason, final training loss and metric, the
    flags, and the curve (step, train loss, train metric, val metric) per epoch."""
    last = history[-1]
    train_metric = last[f"train_{metric}"]
    stop = last.get("stop", "cap")
    chance = at_chance(metric, train_metric, classes)
    return {
        "steps": last["step"],
        "stop": stop,
        "best_epoch": last.get("best_epoch", last["epoch"]),
        "converged": stop != "cap",
        "at_chance": chance,
        "flagged": stop == "cap" or chance,
        "train_loss": last["train_loss"],
        "train_metric": train_metric,
        "curve": [
            [row["step"], row["train_loss"], row[f"train_{metric}"], row.get(f"val_{metric}")] for row in history
        ],
    }
