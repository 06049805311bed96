"""One figure per claim source: each claim's per-seed values, their 95% interval and the bound."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .claims import Claim
from .verdicts import CONTRADICTED, REPRODUCED, Verdict

__all__ = ["save_claim_figures"]

_COLOURS = {REPRODUCED: "tab:green", CONTRADICTED: "tab:red"}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _claim_axes(ax, claim: Claim, values: dict[int, float], verdict: Verdict) -> None:
    data = np.array([values[s] for s in sorted(values)], dtype=float)
    colour = _COLOURS.get(verdict.outcome, "tab:orange")
    if data.size:
        ax.plot(data, np.zeros_like(data), "o", color="black", alpha=0.5, markersize=4, label="seeds")
        ax.plot(
            [verdict.low, verdict.high], [0, 0], "-", color=colour, linewidth=5, alpha=0.6, label="95% CI of the mean"
        )
        ax.plot([verdict.mean], [0], "|", color=colour, markersize=16, markeredgewidth=2)
    ax.axvline(claim.bound, color="tab:blue", linestyle="--", linewidth=1)
    if claim.percent:
        ax.set_xlim(0, 100)
    else:
        points = np.concatenate([data, [claim.bound]]) if data.size else np.array([claim.bound])
        span = max(float(np.ptp(points)), 1e-3)
        ax.set_xlim(points.min() - 0.15 * span, points.max() + 0.15 * span)
    low, high = ax.get_xlim()
    side = (claim.bound, high) if claim.side == ">" else (low, claim.bound)
    ax.axvspan(*side, color="tab:blue", alpha=0.07, linewidth=0)
    ax.set_yticks([])
    ax.set_ylim(-1, 1)
    ax.set_title(f"{claim.statement}: {verdict.outcome} (n={verdict.n})", fontsize=8, loc="left")
    ax.set_xlabel(claim.quantity, fontsize=7)
    ax.tick_params(labelsize=7)


def save_claim_figures(folder: Path, judged: list[tuple[Claim, dict[int, float], Verdict]]) -> dict[str, Path]:
    """Write ``claims_<source>.png`` per source into ``folder``; returns source -> path.

    Each claim is a strip: seeds as dots, the 95% bootstrap interval of their mean as a bar
    (green reproduced, red contradicted, orange inconclusive), the bound as a dashed line, and
    the claim's side of it shaded. Accuracy axes span [0, 100].
    """
    by_source: dict[str, list] = {}
    for entry in judged:
        by_source.setdefault(entry[0].source, []).append(entry)
    paths = {}
    for source, entries in by_source.items():
        fig = Figure(figsize=(6.4, 0.2 + 1.15 * len(entries)), layout="constrained")
        axes = fig.subplots(len(entries), 1, squeeze=False)[:, 0]
        for ax, (claim, values, verdict) in zip(axes, entries, strict=True):
            _claim_axes(ax, claim, values, verdict)
        fig.suptitle(source, fontsize=10)
        path = Path(folder) / f"claims_{_slug(source)}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
        paths[source] = path
    return paths
