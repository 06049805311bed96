"""The study's own figures: one per claim source (each claim's per-seed values, interval, bound
and the paper's value), the resolution sweep, and the training curves of flagged runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..analysis.plots import save_figure
from .claims import Claim
from .verdicts import CONTRADICTED, REPRODUCED, Verdict

__all__ = ["paper_value", "save_claim_figures", "save_resolution_figure", "save_run_curves"]

_COLOURS = {REPRODUCED: "tab:green", CONTRADICTED: "tab:red"}


def _claim_legend() -> tuple[list, list[str]]:
    """What each mark of a claim strip means: handles and labels for one legend per figure."""
    marks = [
        Line2D([], [], marker="o", linestyle="", color="black", alpha=0.5, markersize=4),
        Line2D([], [], color="tab:grey", linewidth=5, alpha=0.6),
        Line2D([], [], marker="|", linestyle="", color="tab:grey", markersize=12, markeredgewidth=2),
        Line2D([], [], color="tab:blue", linestyle="--", linewidth=1),
        Line2D([], [], color="tab:red", linestyle=":", linewidth=1),
        Patch(color="tab:blue", alpha=0.07),
        Line2D([], [], marker="v", linestyle="", color="tab:purple", markersize=7),
    ]
    labels = [
        "one seed",
        "interval of the mean at its look (green reproduced, red contradicted, orange otherwise)",
        "mean over seeds",
        "the claim's bound",
        "the smallest gain the claim implies (an interval wholly short of it contradicts)",
        "the claim's side of it",
        "the paper's value",
    ]
    return marks, labels


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def paper_value(claim: Claim) -> float | None:
    """The paper's number in the claim's quantity, where the paper prints one (``a -> b`` is a change: b - a)."""
    change = re.fullmatch(r"\s*([-+]?[\d.]+)\s*->\s*([-+]?[\d.]+)\s*", claim.paper)
    if change:
        before, after = float(change[1]), float(change[2])
        scale = 100.0 if claim.percent or "points" in claim.quantity else 1.0
        return scale * (after - before) if after <= 1.0 and scale == 100.0 else after - before
    lead = re.match(r"\s*([-+]?\d+(?:\.\d+)?)(?:\s|$)", claim.paper)
    return float(lead[1]) if lead else None


def _claim_axes(ax, claim: Claim, values: dict[int, float], verdict: Verdict) -> None:
    data = np.array([values[s] for s in sorted(values)], dtype=float)
    colour = _COLOURS.get(verdict.outcome, "tab:orange")
    if data.size:
        ax.plot(data, np.zeros_like(data), "o", color="black", alpha=0.5, markersize=4, label="seeds")
        ax.plot(
            [verdict.low, verdict.high], [0, 0], "-", color=colour, linewidth=5, alpha=0.6, label="interval of the mean"
        )
        ax.plot([verdict.mean], [0], "|", color=colour, markersize=16, markeredgewidth=2)
    ax.axvline(claim.bound, color="tab:blue", linestyle="--", linewidth=1)
    if claim.margin:
        ax.axvline(claim.contradicted_at, color="tab:red", linestyle=":", linewidth=1)
    paper = paper_value(claim)
    if paper is not None:
        ax.plot([paper], [0.5], "v", color="tab:purple", markersize=7, label="paper")
    if claim.percent:
        ax.set_xlim(0, 100)
    else:
        marks = [claim.bound, claim.contradicted_at] + ([paper] if paper is not None else [])
        marks += [v for v in (verdict.low, verdict.high) if np.isfinite(v)]
        points = np.concatenate([data, marks]) if data.size else np.array(marks)
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

    Each claim is a strip: seeds as dots, the interval of their mean at the verdict's look as a bar
    (green reproduced, red contradicted, orange inconclusive or not converged), the bound as a
    dashed line, the claim's side of it shaded, a claimed gain's smallest size as a red dotted line,
    and the paper's value as a purple triangle where the paper prints a number. Accuracy axes span
    [0, 100].
    """
    by_source: dict[str, list] = {}
    for entry in judged:
        by_source.setdefault(entry[0].source, []).append(entry)
    paths = {}
    for source, entries in by_source.items():
        fig = Figure(figsize=(6.4, 1.7 + 1.15 * len(entries)), layout="constrained")
        axes = fig.subplots(len(entries), 1, squeeze=False)[:, 0]
        for ax, (claim, values, verdict) in zip(axes, entries, strict=True):
            _claim_axes(ax, claim, values, verdict)
        fig.suptitle(source, fontsize=10)
        fig.legend(*_claim_legend(), fontsize=7, loc="outside lower center", ncol=1, frameon=False)
        path = Path(folder) / f"claims_{_slug(source)}.png"
        save_figure(fig, path, dpi=100, tight=False)
        paths[source] = path
    return paths


_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h")


def save_resolution_figure(path: Path, sizes: list[int], series: dict[str, list[float]], *, trained_at: int) -> Path:
    """Direction accuracy per evaluation size, one line per family; lines that coincide are drawn side
    by side (each family's points shifted a little along x) with their own marker and dash, never hidden."""
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    xs = np.arange(len(sizes), dtype=float)
    shift = 0.25 / max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        offset = (i - (len(series) - 1) / 2) * shift
        ax.plot(
            xs + offset,
            values,
            linestyle=_STYLES[i % len(_STYLES)],
            marker=_MARKERS[i % len(_MARKERS)],
            markersize=4,
            linewidth=1,
            label=label,
        )
    ax.set_xticks(xs, [str(s) for s in sizes])
    ax.set_xlabel("evaluation image size (pixels)")
    ax.set_ylabel("direction accuracy %, mean over seeds")
    ax.set_ylim(0, 102)
    ax.axvline(xs[sizes.index(trained_at)] if trained_at in sizes else -1, color="grey", linewidth=0.5)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_title(f"trained at {trained_at} px (grey line)", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    save_figure(fig, path, dpi=100, tight=False)
    return path


def save_run_curves(path: Path, runs: dict[str, list[tuple[int, list[list]]]], metric_of: dict[str, str]) -> Path:
    """Training curves of runs, one panel per ``family task`` (``runs`` maps it to (seed, curve) pairs,
    each curve rows of step, train loss, train metric, val metric): training metric solid, validation dashed."""
    panels = list(runs)
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(3.2 * cols, 2.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, name in zip(axes, panels, strict=False):
        for seed, curve in runs[name]:
            data = np.array([[np.nan if v is None else v for v in row] for row in curve], dtype=float)
            (line,) = ax.plot(data[:, 0], data[:, 2], "-", linewidth=1, label=f"seed {seed}")
            ax.plot(data[:, 0], data[:, 3], "--", linewidth=1, color=line.get_color())
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.set_ylabel(metric_of[name], fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("training (solid) and validation (dashed) metric per epoch", fontsize=9)
    save_figure(fig, path, dpi=100, tight=False)
    return path
