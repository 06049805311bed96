"""Whether a result sits at chance: an accuracy within a few points of 100 / classes, or an R² near 0.

One rule for every run: the study flags a cell by it, and ``vitpos train`` and ``vitpos pretrain-pe``
say so in their last line, since a run at chance learned nothing about its task and says nothing
about its model. Classes are taken as balanced (the synthetic tasks' are).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHANCE_MARGIN", "CHANCE_R2", "at_chance", "best_validation", "chance_note"]

CHANCE_MARGIN = 10.0
"""Points above chance (100 / classes) within which an accuracy counts as chance."""
CHANCE_R2 = 0.1
"""R² below which a regression counts as chance."""
JUDGED = ("acc1", "r2")
"""The headline metrics that have a chance level: a classifier's accuracy, a regression's R²."""


def at_chance(metric: str, value: float, classes: int) -> bool:
    """Whether ``value`` of ``metric`` (``acc1`` in %, or ``r2``) is at chance."""
    if metric == "acc1":
        return value < 100.0 / classes + CHANCE_MARGIN
    return value < CHANCE_R2


def best_validation(history: list[dict[str, Any]], metric: str) -> float | None:
    """The best validation ``metric`` of a run's epochs, or None where none was evaluated."""
    values = [row[f"val_{metric}"] for row in history if row.get(f"val_{metric}") is not None]
    return max(values, default=None)


def chance_note(history: list[dict[str, Any]], metric: str, classes: int) -> str | None:
    """A sentence saying a run's best validation result sits at chance, or None when it left chance (or
    ``metric`` has no chance level)."""
    best = best_validation(history, metric) if metric in JUDGED else None
    if best is None or not at_chance(metric, best, classes):
        return None
    if metric == "acc1":
        level = 100.0 / classes
        return (
            f"at chance: its best validation acc1 {best:.1f}% is within {CHANCE_MARGIN:g} points of chance "
            f"({level:.3g}% for {classes} classes)"
        )
    return f"at chance: its best validation R² {best:.3f} is below {CHANCE_R2:g}"
