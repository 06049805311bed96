"""Turn finished cells into the study's tables, figures, ``results.json`` and ``report.md``."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..analysis.plots import save_curves, save_heatmaps
from ..errors import VitposError, quote
from ..files import write_json
from .cells import Cell
from .claims import LEARNS, evaluate_claims, fmt_value
from .convergence import CHANCE_MARGIN, CHANCE_R2, is_flagged
from .figures import save_claim_figures, save_resolution_figure, save_run_curves
from .protocol import EFFICIENCY_TASKS, StudyConfig
from .verdicts import INCONCLUSIVE, NO_EFFECT, NOT_CONVERGED, NOT_RUN, OUTCOMES

__all__ = ["mean_std", "summarise", "verdict_table", "write_report", "report_from_results"]

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
        cells = {c: r for c, r in results.items() if c.family == family.label}
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
                        if key != "test_pairs":
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
        cmap="RdBu_r",
        vmin=-1.0,
        vmax=1.0,
        colorbar_label="change / the row's largest change",
        title="change of the cosine similarity to the reference cell (star) through training on absolute_colorshift; "
        "each row scaled to its largest change (in brackets)",
    )


def convergence_section(
    config: StudyConfig, results: dict[Cell, dict[str, Any]], folder: Path
) -> tuple[str, Path | None]:
    """Per family and task: median steps and the flagged runs (at the cap, at chance); and a figure of
    the training curves of every run that is flagged or did not solve its task (``none`` aside: it
    is not expected to)."""
    header = ["family", *(f"{t} steps · flagged" for t in ("direction", "distance", "absolute"))]
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
            why = [f"{cap} at the cap"] * bool(cap) + [f"{chance} at chance"] * bool(chance)
            text = f"{int(np.median(steps))}" if steps else "—"
            if bad:
                text += f" · {len(bad)} ({', '.join(why)})"
            row.append(text)
        rows.append(row)
    metric_of = {name: "train/val acc %" if "distance" not in name else "train/val R²" for name in shown}
    path = save_run_curves(folder / "unsolved_runs.png", shown, metric_of) if shown else None
    return _table(header, rows), path


def verdict_table(judged) -> str:
    """The report's opening table: one row per claim, with the computed verdict."""
    rows = []
    for claim, _, verdict in judged:
        ours = (
            "—"
            if verdict.outcome == NOT_RUN
            else (
                f"{fmt_value(verdict.mean, claim)} "
                f"[{fmt_value(verdict.low, claim)}, {fmt_value(verdict.high, claim)}] (n={verdict.n})"
            )
        )
        outcome = f"**{verdict.outcome}**"
        if verdict.outcome == NOT_CONVERGED:
            outcome += f" ({verdict.flagged} of {verdict.n} seeds rest on flagged runs)"
        elif verdict.no_effect:
            outcome += " (no effect at this spread)"
        elif verdict.outcome == INCONCLUSIVE:
            outcome += (
                f" (~{verdict.seeds_needed} seeds would decide)"
                if verdict.seeds_needed
                else " (more seeds needed; no estimate)"
            )
        rows.append([claim.statement, claim.source, claim.paper, claim.quantity, ours, claim.test, outcome])
    header = ["claim", "source", "paper", "our quantity", "ours: mean [95% CI]", "test", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _rates_table(config: StudyConfig, results: dict[Cell, dict[str, Any]]) -> str:
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


def _cells_json(results: dict[Cell, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per cell: its key and its results (the family's settings are in the config)."""
    return [
        {
            "family": c.family,
            "task": c.task,
            "train_size": c.train_size,
            "seed": c.seed,
            **{k: v for k, v in r.items() if k != "family"},
        }
        for c, r in sorted(results.items())
    ]


def write_report(
    folder: Path,
    config: StudyConfig,
    results: dict[Cell, dict[str, Any]],
    *,
    missing: dict[str, list[str]],
    wall_seconds: list[float],
    command: str,
) -> Path:
    """Write ``results.json``, the figures and ``report.md`` into ``folder``; returns the report path.

    ``wall_seconds`` holds the wall time of every invocation that ran cells of this study.
    """
    folder = Path(folder)
    figures = folder / "figures"
    summary = summarise(config, results)
    total = len(config.cells())
    judged = evaluate_claims(results, config.train_size, tuple(config.resolutions), {f.label for f in config.families})
    claim_paths = save_claim_figures(figures, judged)
    efficiency_paths, efficiency_table = efficiency_figures(config, summary, figures)
    resolution_path, resolution_table = resolution_section(config, summary, figures)
    similarity_path = similarity_figure(config, summary, figures)
    convergence_table, curves_path = convergence_section(config, results, figures)

    def image(path: Path | None, alt: str) -> str:
        return f"![{alt}]({path.relative_to(folder).as_posix()})" if path else ""

    seeds = config.seeds
    train_px = config.model.image_hw[0]
    compute = sum(r.get("cpu_seconds", r.get("seconds", 0.0)) for r in results.values())
    wall = sum(wall_seconds)
    counts = {outcome: sum(v.outcome == outcome for _, _, v in judged) for outcome in OUTCOMES}
    lines = [
        "# Position-encoding study",
        "",
        f"{len(results)} of {total} training runs finished: {seeds} seed(s) per family, "
        f"{len(config.families)} families, {config.train_size}/{config.val_size}/{config.test_size} "
        f"train/val/test images at {train_px}x{train_px} px. "
        f"Wall time {wall / 60:.1f} min over {len(wall_seconds)} invocation(s); {compute / 60:.1f} CPU-minutes of "
        f"training and measurement. Reproduce with `{command}`; every number below is in `results.json`, and "
        "`vitpos study --report-only` rewrites this report from it.",
        "",
        "## Verdicts",
        "",
        f"{counts['reproduced']} reproduced, {counts['contradicted']} contradicted, "
        f"{counts['inconclusive']} inconclusive, {counts['not converged']} not converged"
        + (f", {counts['not run']} not run" if counts["not run"] else "")
        + ". Each claim is a quantity measured per "
        "seed, tested against a bound: reproduced when the whole 95% bootstrap interval of its mean over seeds lies "
        "on the claim's side, contradicted when it lies wholly on the other side, inconclusive otherwise (with the "
        f"seeds that would decide it if the spread held; beyond {NO_EFFECT} times the seeds run, no effect at this "
        "spread). A claim that is not reproduced while some of its seeds rest on flagged runs (stopped at the step "
        "cap still improving, or with a training metric at chance: see Convergence) is *not converged*: the "
        "optimisation failed, which says nothing about the encoding. Accuracy in %, R² as is; differences are paired "
        "by seed.",
        "",
        verdict_table(judged),
        "",
        *(line for source, path in claim_paths.items() for line in (image(path, source), "")),
        "## Location tasks (thesis Tables 1, 3, 4)",
        "",
        f"Test metrics after training on each red-green task, mean ± std over {seeds} seed(s): accuracy in % "
        "(chance 50) for left/right direction, upper/lower absolute location and absolute location under "
        "unseen test colours, R² (0 = predicting the mean, 1 = exact) for the (dx, dy) offset. The absolute and "
        "colour-shift columns share one trained model per seed (the same training images; "
        "only the test colours differ).",
        "",
        main_table(config, summary),
        "",
        chance_note(config, summary),
        "",
        tie_note(config, summary),
        "",
        "## Convergence",
        "",
        f"Every run trains until its validation metric has not improved for {config.patience} epochs (counted "
        f"from epoch {config.min_epochs} on, so that a run on an early plateau has time to leave it), or at once "
        "when it is solved (validation accuracy 100%, or R² ≥ 0.99), and keeps the weights of its best epoch; "
        f"{config.epochs} epochs of {config.train_size} images are the cap. A run is flagged when it stopped at "
        f"the cap, or when its final training accuracy and its best validation accuracy are both within "
        f"{CHANCE_MARGIN:g} points of chance (R² below {CHANCE_R2:g}). "
        "Median optimiser steps per run, and the flagged runs; the figure shows the "
        "training (solid) and validation (dashed) curve of every run that is flagged or did not solve its task "
        "(test accuracy below 90%, or R² below 0.8), `none` aside:",
        "",
        convergence_table,
        "",
        image(curves_path, "runs that are flagged or did not solve their task"),
        "",
        "## What the position table knows (thesis Table 2)",
        "",
        "Cross-validated linear probes on the absolute table at initialisation and after training (left/right and "
        "up/down accuracy % from the direction models, (dx, dy) R² from the distance models; folds hold out cells): "
        "a high score before training is a built-in relative-location bias, a rise after training is location "
        "learned from the task.",
        "",
        probe_table(config, summary),
        "",
        "## Data efficiency (thesis Fig. 3)",
        "",
        "Test metric versus the number of training images: a curve that is already high at few images marks a "
        "data-efficient encoding.",
        "",
        efficiency_table,
        "",
        *(image(p, p.stem) for p in efficiency_paths),
        "",
        "## Resolution generalisation",
        "",
        f"Direction accuracy of the models trained at {train_px} px, evaluated without fine-tuning at other "
        "image sizes (learned tables resampled bicubically, fixed tables recomputed, PEG and relative encodings "
        "as they are): a flat row generalises to new resolutions.",
        "",
        resolution_table,
        "",
        image(resolution_path, "resolution"),
        "",
    ]
    if similarity_path:
        lines += [
            "## What learnable tables learn (thesis Fig. 5)",
            "",
            "How the cosine similarity between the encoding of a reference cell (star) and every other cell "
            "changed through training on absolute_colorshift (first seed): red rose, blue fell; each row is "
            "scaled to its own largest change, printed beside its name. A learnable table that adapts shows "
            "the task's upper/lower split; a fixed table does not change.",
            "",
            image(similarity_path, "similarity"),
            "",
        ]
    m = config.model
    ctx = m.stage_context(0)  # the study model is a ViT: one stage
    steps = config.epochs * (config.train_size // config.batch_size)
    rates = _rates_table(config, results)
    lines += [
        "## Setup",
        "",
        f"- model: {ctx.depth} encoder block(s), width {ctx.embed_dim}, {ctx.num_heads} heads, MLP ratio "
        f"{m.mlp_ratios[0]:g}, patch {m.patch_size} on {m.image_hw[0]}x{m.image_hw[1]} images, {m.head} head; "
        "each family sets its slots on it",
    ]
    for family in (f for f in config.families if f.host):
        h = family.model_config(config.model)
        grids = ", ".join(f"{a}x{b}" for a, b in h.stage_grids(h.image_hw))
        depths = ", ".join(str(h.stage_context(s).depth) for s in range(h.num_stages))
        lines.append(
            f"- family {family.label}: the {h.arch} host, {h.num_stages} stages of {depths} "
            f"block(s), widths {', '.join(map(str, h.embed_dims))}, grids {grids}, {h.head} head"
        )
    lines += [
        f"- data: {config.train_size}/{config.val_size}/{config.test_size} train/val/test images per task, "
        f"learning curves at {', '.join(map(str, config.train_sizes))} training images "
        f"({'every family' if config.efficiency_families is None else ', '.join(config.efficiency_families)})",
        f"- training: at most {config.epochs} epochs of {config.train_size} images (smaller sets: the same cap of "
        f"{steps} steps), warm-up over the first tenth of the cap then cosine decay, batch {config.batch_size}, "
        f"AdamW, weight decay {config.weight_decay}; {seeds} seed(s), each setting initialisation and data",
        "- learning rate: per family and training task, the best validation metric of "
        + (", ".join(map(str, config.lr_grid)) if config.lr_grid else f"{config.lr} alone")
        + f" on the data of seed {config.rate_seed} (not reported), chosen once with the stopping rule above; a "
        "pretrained family uses the rates of its model trained from scratch, and its pretraining the direction rate",
        "- pretrained families start from a PE trained on direction4 then distance "
        f"({config.pretrain_size} images, {config.pretrain_epochs} epochs each; thesis §5.1)",
        "",
        rates,
    ]
    if missing:
        lines.append(
            "- not run, their slot values are not available in this installation: "
            + "; ".join(f"{label} ({', '.join(values)})" for label, values in missing.items())
        )
    report = folder / "report.md"
    report.write_text("\n".join(lines) + "\n")
    write_json(
        folder / "results.json",
        {
            "config": config.to_dict(),
            "command": command,
            "missing_families": missing,
            "wall_seconds": list(wall_seconds),
            "finished_cells": len(results),
            "total_cells": total,
            "verdicts": [
                {
                    "source": c.source,
                    "claim": c.statement,
                    "paper": c.paper,
                    "quantity": c.quantity,
                    "side": c.side,
                    "bound": c.bound,
                    "test": c.test,
                    "values": {str(k): v for k, v in values.items()},
                    **verdict.to_dict(),
                }
                for c, values, verdict in judged
            ],
            "summary": summary,
            "cells": _cells_json(results),
        },
    )
    return report


_RESULT_TYPES = {"config": dict, "cells": list, "missing_families": dict, "wall_seconds": list, "command": str}
"""The entries of ``results.json`` the report is rewritten from, and their JSON types."""


def _read_results(path: Path) -> dict[str, Any]:
    """``results.json`` parsed, with each entry the report reads present and of its type."""
    try:
        data = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise VitposError(f"{path} is not valid JSON ({err}); rerun the study to write it again") from None
    if not isinstance(data, dict):
        raise VitposError(f"{path} must hold a JSON object, not {type(data).__name__}; rerun the study to write it")
    for key, kind in _RESULT_TYPES.items():
        if not isinstance(data.get(key), kind):
            raise VitposError(
                f"{path}: entry {key!r} is missing or of the wrong type ({quote(data.get(key))}); "
                "rerun the study to write it again"
            )
    return data


def report_from_results(folder: str | Path) -> Path:
    """Rewrite ``report.md`` and the figures from ``results.json`` alone (no training)."""
    folder = Path(folder)
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run the study into {folder} first")
    data = _read_results(path)
    try:
        config = StudyConfig.from_dict(data["config"])
    except (TypeError, ValueError) as err:
        raise VitposError(f"{path}: its 'config' entry is invalid ({err}); rerun the study to write it again") from None
    keys = ("family", "task", "train_size", "seed")
    results = {}
    for i, c in enumerate(data["cells"]):
        if not isinstance(c, dict) or not all(k in c for k in keys):
            raise VitposError(
                f"{path}: cells[{i}] is not a mapping with {', '.join(keys)} ({quote(c)}); rerun the study to write it"
            )
        results[Cell(*(c[k] for k in keys))] = {k: v for k, v in c.items() if k not in keys}
    return write_report(
        folder,
        config,
        results,
        missing=data["missing_families"],
        wall_seconds=data["wall_seconds"],
        command=data["command"],
    )
