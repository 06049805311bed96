"""The study's numbers per family: mean ± std over seeds of every metric, probe, resolution and map."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..analysis.probes import SCORES as PROBE_SCORES
from .cells import UNTRAINED, Cell
from .claims import LEARNS
from .convergence import is_flagged
from .protocol import StudyConfig

__all__ = ["METRIC_OF", "SOLVED", "TIE", "mean_std", "summarise"]


METRIC_OF = {"direction": "accuracy", "distance": "r2", "absolute": "accuracy", "absolute_colorshift": "accuracy"}
SOLVED = {"accuracy": LEARNS / 100, "r2": 0.8}
"""Test metric at which a run has solved its task (the claims' "learns" bounds)."""
TIE = {"accuracy": 0.05, "r2": 0.05}
"""Mean gap to ``none`` within which a family ties it."""


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value); NaN, NaN when empty."""
    data = [v for v in values if v is not None and not math.isnan(v)]
    if not data:
        return math.nan, math.nan
    return float(np.mean(data)), float(np.std(data, ddof=1)) if len(data) > 1 else 0.0


def _stat(values: list[float], solved: float | None = None, flagged: int = 0) -> dict[str, float | int]:
    mean, std = mean_std(values)
    out: dict[str, float | int] = {"mean": mean, "std": std, "n": len(values)}
    if solved is not None:
        out |= {"solved": sum(v >= solved for v in values), "flagged": flagged}
    return out


def summarise(config: StudyConfig, results: dict[Cell, dict[str, Any]]) -> dict[str, Any]:
    """Per family: mean ± std over seeds of every metric, probes, resolutions; plus first-seed maps."""
    summary: dict[str, Any] = {}
    for family in config.families:
        cells = {c: r for c, r in results.items() if c.family == family.label and c.train_size != UNTRAINED}
        metrics = defaultdict(list)
        flagged: dict[tuple[str, int], int] = defaultdict(int)
        probes = defaultdict(list)
        resolution = defaultdict(list)
        for cell, result in sorted(cells.items()):
            metrics[(cell.task, cell.train_size)].append(result["test"])
            flagged[(cell.task, cell.train_size)] += is_flagged(result)
            if cell.train_size == config.train_size:
                for stage, scores in result.get("probes", {}).items():
                    for key, value in scores.items():
                        if key in PROBE_SCORES:
                            probes[f"{cell.task}/{stage}/{key}"].append(value)
                for size, value in result.get("resolution", {}).items():
                    resolution[int(size)].append(value)
        similarity = next((r["similarity"] for c, r in sorted(cells.items()) if "similarity" in r), None)
        summary[family.label] = {
            "tasks": {
                f"{task}@{n}": _stat(v, SOLVED[METRIC_OF[task]], flagged[(task, n)])
                for (task, n), v in sorted(metrics.items())
            },
            "probes": {k: _stat(v) for k, v in sorted(probes.items())},
            "resolution": {str(k): _stat(v) for k, v in sorted(resolution.items())},
            "similarity": similarity,
        }
    return summary
