"""The sections of the study's report: its tables, notes and figures, each from the summary or the cells."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..analysis.plots import save_curves, save_heatmaps
from .cells import Cell
from .claims import fmt_value
from .convergence import has_learned, is_flagged, stopped_short
from .figures import save_resolution_figure, save_run_curves
from .protocol import EFFICIENCY_TASKS, StudyConfig
from .summary import METRIC_OF, SOLVED, TIE
from .verdicts import INCONCLUSIVE, NOT_CONVERGED, NOT_RUN, Verdict

__all__ = [
    "main_table",
    "chance_note",
    "tie_note",
    "probe_table",
    "efficiency_figures",
    "resolution_section",
    "similarity_figure",
    "convergence_section",
    "verdict_table",
    "rates_table",
]


def _fmt(stat: dict | None, percent: bool) -> str:
    """mean ± std, and where the task has a solved threshold "solved on k of n" (and the flagged runs)."""
    if not stat or math.isnan(stat["mean"]):
        return "—"
    text = (
        f"{100 * stat['mean']:.2f} ± {100 * stat['std']:.2f}" if percent else f"{stat['mean']:.2f} ± {stat['std']:.2f}"
    )
    if "solved" in stat:
        text += f" (solved {stat['solved']}/{stat['n']}" + (f", {stat['flagged']} flagged)" if stat["flagged"] else ")")
    return text


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _task(summary: dict, family: str, task: str, n: int) -> dict | None:
    return summary[family]["tasks"].get(f"{task}@{n}")


def main_table(config: StudyConfig, summary: dict) -> str:
    """Thesis Tables 1, 3 and 4 side by side."""
    header = [
        "family",
        "slots",
        "direction acc % (T1)",
        "distance R² (T1)",
        "absolute acc % (T3)",
        "colour-shift acc % (T4)",
    ]
    rows = []
    for family in config.families:
        slots = family.describe()
        rows.append(
            [
                family.label,
                f"`{slots}`",
                *(
                    _fmt(_task(summary, family.label, task, config.train_size), task != "distance")
                    for task in ("direction", "distance", "absolute", "absolute_colorshift")
                ),
            ]
        )
    return _table(header, rows)


def chance_note(config: StudyConfig, summary: dict) -> str:
    """Which families stayed at chance on which task (accuracy within 5 points of 50%, or R² below 0.1)."""
    parts = []
    for task in ("direction", "distance", "absolute", "absolute_colorshift"):
        labels = []
        for family in config.families:
            stat = _task(summary, family.label, task, config.train_size)
            if stat and not math.isnan(stat["mean"]):
                at_chance = stat["mean"] < 0.1 if task == "distance" else abs(stat["mean"] - 0.5) <= 0.05
                if at_chance:
                    labels.append(family.label)
        if labels:
            parts.append(f"{task}: {', '.join(labels)}")
    if not parts:
        return "Every family learned every task."
    return "At chance (mean within 5 points of 50%, or R² below 0.1): " + "; ".join(parts) + "."


def tie_note(config: StudyConfig, summary: dict) -> str:
    """In words: which families score like ``none`` (no position encoding) on which task, and what
    pretraining did to its family (``X_pretrained`` against ``X``)."""
    labels = {f.label for f in config.families}
    lines = []
    for task in ("direction", "distance", "absolute", "absolute_colorshift"):
        base = _task(summary, "none", task, config.train_size) if "none" in labels else None
        if base is None:
            continue
        ties = [
            f.label
            for f in config.families
            if f.label != "none"
            and (stat := _task(summary, f.label, task, config.train_size))
            and abs(stat["mean"] - base["mean"]) <= TIE[METRIC_OF[task]]
        ]
        if ties:
            lines.append(
                f"On {task}, {', '.join(ties)} {'ties' if len(ties) == 1 else 'tie'} `none`: "
                "as good as no position encoding at all."
            )
    for family in config.families:
        plain = family.label.removesuffix("_pretrained")
        if not family.pretrained or plain == family.label or plain not in labels:
            continue
        for task in ("direction", "distance", "absolute", "absolute_colorshift"):
            a, b = _task(summary, family.label, task, config.train_size), _task(summary, plain, task, config.train_size)
            if a and b and abs(a["mean"] - b["mean"]) > TIE[METRIC_OF[task]]:
                verb = "raises" if a["mean"] > b["mean"] else "lowers"
                scale, unit = (100, " points") if METRIC_OF[task] == "accuracy" else (1, " in R²")
                lines.append(f"Pretraining {verb} {plain} on {task} by {scale * abs(a['mean'] - b['mean']):.2f}{unit}.")
    return " ".join(lines)


def probe_table(config: StudyConfig, summary: dict) -> str:
    """Thesis Table 2: probes before and after training, families with a table only."""
    header = ["family", "left-right before", "after", "up-down before", "after", "(dx, dy) R² before", "after"]
    rows = []
    for family in config.families:
        probes = summary[family.label]["probes"]
        if not probes:
            continue
        cols = []
        for task, key, percent in (
            ("direction", "left_right", True),
            ("direction", "up_down", True),
            ("distance", "distance_r2", False),
        ):
            cols += [_fmt(probes.get(f"{task}/{stage}/{key}"), percent) for stage in ("before", "after")]
        rows.append([family.label, *cols])
    return _table(header, rows) if rows else "_No family with an absolute position table._"


def efficiency_figures(config: StudyConfig, summary: dict, folder: Path) -> tuple[list[Path], str]:
    """Thesis Fig. 3: metric versus training-set size, one figure per task, and the table behind it."""
    sizes = list(config.train_sizes)
    paths = []
    curves = [f for f in config.families if config.curves(f.label)]
    for task in EFFICIENCY_TASKS:
        percent = METRIC_OF[task] == "accuracy"
        series = {}
        for family in curves:
            stats = [_task(summary, family.label, task, n) or {"mean": math.nan, "std": math.nan} for n in sizes]
            scale = 100 if percent else 1
            series[family.label] = ([scale * s["mean"] for s in stats], [scale * s["std"] for s in stats])
        paths.append(
            save_curves(
                folder / f"efficiency_{task}.png",
                sizes,
                series,
                xlabel="training images",
                logx=True,
                ylabel="test accuracy %" if percent else "test R²",
                title=f"{task}: data efficiency",
                ylim=(0, 100) if percent else None,
            )
        )
    header = ["family", *(f"{task} @ {n}" for task in EFFICIENCY_TASKS for n in sizes)]
    rows = [
        [
            f.label,
            *(
                _fmt(_task(summary, f.label, task, n), METRIC_OF[task] == "accuracy")
                for task in EFFICIENCY_TASKS
                for n in sizes
            ),
        ]
        for f in curves
    ]
    return paths, _table(header, rows)


def resolution_section(config: StudyConfig, summary: dict, folder: Path) -> tuple[Path | None, str]:
    """Direction accuracy versus evaluation image size, as a figure and a table."""
    sizes = sorted({int(s) for f in config.families for s in summary[f.label]["resolution"]})
    if not sizes:
        return None, "_No resolution results yet._"
    series = {}
    rows = []
    for family in config.families:
        stats = [summary[family.label]["resolution"].get(str(s)) or {"mean": math.nan, "std": math.nan} for s in sizes]
        series[family.label] = [100 * s["mean"] for s in stats]
        rows.append([family.label, *(_fmt(s, True) for s in stats)])
    path = save_resolution_figure(folder / "resolution.png", sizes, series, trained_at=config.model.image_hw[0])
    return path, _table(["family", *(f"{s} px" for s in sizes)], rows)


def similarity_figure(config: StudyConfig, summary: dict, folder: Path) -> Path | None:
    """Thesis Fig. 5: cosine-similarity maps before and after training, for the first seed."""
    entries = [(f.label, summary[f.label]["similarity"]) for f in config.families if summary[f.label]["similarity"]]
    if not entries:
        return None
    refs = [tuple(r) for r in entries[0][1]["references"]]
    rows, labels = [], []
    for label, sim in entries:
        change = torch.stack([torch.tensor(sim["after"][k]) - torch.tensor(sim["before"][k]) for k in range(len(refs))])
        largest = float(change.abs().max())
        rows.append(change / largest if largest > 0 else change)
        labels.append(f"{label} (±{largest:.3f})")
    return save_heatmaps(
        folder / "similarity.png",
        torch.stack(rows),
        row_labels=labels,
        col_labels=[f"cell {r},{c}" for r, c in refs],
        markers=refs,
        diverging=True,
        vmin=-1.0,
        vmax=1.0,
        colorbar_label="change / the row's largest change",
        title="change of the cosine similarity to the reference cell (star) through training on absolute_colorshift; "
        "each row scaled to its largest change (in brackets)",
    )


def convergence_section(
    config: StudyConfig, results: dict[Cell, dict[str, Any]], folder: Path
) -> tuple[str, Path | None]:
    """Per family and task: median steps, the flagged runs (at the cap, at chance) and the runs that stopped
    short where other seeds learned (failures to train, though not flagged); and a figure of
    the training curves of every run that is flagged or did not solve its task (``none`` aside: it
    is not expected to)."""
    header = ["family", *(f"{t} steps · flagged of runs" for t in ("direction", "distance", "absolute"))]
    rows, shown = [], {}
    for family in config.families:
        row = [family.label]
        for task in ("direction", "distance", "absolute"):
            runs = {
                c: r
                for c, r in results.items()
                if c.family == family.label and c.task == task and c.train_size == config.train_size
            }
            steps = [r["steps"] for r in runs.values() if "steps" in r]
            bad = {c.seed: r for c, r in sorted(runs.items()) if is_flagged(r)}
            unsolved = [
                (c.seed, r["curve"])
                for c, r in sorted(runs.items())
                if "curve" in r and (is_flagged(r) or r["test"] < SOLVED[METRIC_OF[task]])
            ]
            if unsolved and family.label != "none":
                shown[f"{family.label} {task}"] = unsolved
            cap = sum(r["stop"] == "cap" for r in bad.values())
            chance = len(bad) - cap
            learned = any(has_learned(r) for r in runs.values())
            short = sum(learned and stopped_short(r) and not is_flagged(r) for r in runs.values())
            why = [f"{cap} at the cap"] * bool(cap) + [f"{chance} at chance"] * bool(chance)
            longer = sum(r.get("extended_from") is not None for r in runs.values())
            why += [f"{longer} trained on the longer cap"] * bool(longer)
            text = f"{int(np.median(steps))}" if steps else "—"
            if bad or longer:
                text += f" · {len(bad)} of {len(runs)}" + (f" ({', '.join(why)})" if why else "")
            if short:
                text += f" · {short} of {len(runs)} stopped short"
            row.append(text)
        rows.append(row)
    metric_of = {name: "train/val acc %" if "distance" not in name else "train/val R²" for name in shown}
    path = save_run_curves(folder / "unsolved_runs.png", shown, metric_of) if shown else None
    return _table(header, rows), path


def seeds_used(verdict: Verdict) -> str:
    """The seeds a verdict rests on: how many, the failures left out, the look it was reached at."""
    return (
        f"n={verdict.n}"
        + (f" + {verdict.failed} failed to train" if verdict.failed else "")
        + (f", look {verdict.round}" if verdict.round > 1 else "")
    )


def verdict_table(judged) -> str:
    """The report's opening table: one row per claim, with the computed verdict."""
    rows = []
    for claim, _, verdict in judged:
        ours = (
            "—"
            if verdict.outcome == NOT_RUN
            else (
                f"{fmt_value(verdict.mean, claim)} "
                f"[{fmt_value(verdict.low, claim)}, {fmt_value(verdict.high, claim)}] ({seeds_used(verdict)})"
            )
        )
        outcome = f"**{verdict.outcome}**"
        if verdict.outcome == NOT_CONVERGED:
            outcome += f" ({verdict.flagged} of {verdict.n} seeds rest on flagged runs)"
        elif verdict.no_effect:
            outcome += f" (no effect at this spread: ~{verdict.seeds_needed} seeds would decide)"
        elif verdict.outcome == INCONCLUSIVE:
            outcome += (
                f" (~{verdict.seeds_needed} seeds would decide)"
                if verdict.seeds_needed
                else " (more seeds needed; no estimate)"
            )
        rows.append([claim.statement, claim.source, claim.paper, claim.quantity, ours, claim.test, outcome])
    header = ["claim", "source", "paper", "our quantity", "ours: mean [interval] (seeds)", "test", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def rates_table(config: StudyConfig, results: dict[Cell, dict[str, Any]]) -> str:
    """The learning rate each family trained each task with (from its cells)."""
    tasks = ("direction", "distance", "absolute")
    rows = []
    for family in config.families:
        lrs = [
            sorted({r["lr"] for c, r in results.items() if c.family == family.label and c.task == t and "lr" in r})
            for t in tasks
        ]
        rows.append([family.label, *(", ".join(f"{v:g}" for v in lr) or "—" for lr in lrs)])
    return _table(["family", *(f"{t} lr" for t in tasks)], rows)
