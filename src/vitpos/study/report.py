"""Write the study's ``results.json`` and ``report.md`` (with its figures), and rewrite the report from
``results.json`` alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import VitposError, quote
from ..files import write_atomic, write_json
from ..progress import progress_bar
from .cells import UNTRAINED, Cell
from .claims import evaluate_claims
from .convergence import CHANCE_MARGIN, CHANCE_R2
from .figures import save_claim_figures
from .protocol import StudyConfig
from .sections import (
    chance_note,
    convergence_section,
    efficiency_figures,
    main_table,
    probe_table,
    rates_table,
    resolution_section,
    similarity_figure,
    tie_note,
    verdict_table,
)
from .sequential import RESERVE
from .summary import summarise
from .verdicts import OUTCOMES

__all__ = ["write_report", "report_from_results"]


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
    first_round = set(config.cells())
    total = len(first_round)
    rule = config.sequential
    judged = evaluate_claims(
        results, config.train_size, tuple(config.resolutions), {f.label for f in config.families}, rule=rule
    )
    with progress_bar(5, "study report figures", unit="figure") as bar:
        claim_paths = save_claim_figures(figures, judged)
        bar.update()
        efficiency_paths, efficiency_table = efficiency_figures(config, summary, figures)
        bar.update()
        resolution_path, resolution_table = resolution_section(config, summary, figures)
        bar.update()
        similarity_path = similarity_figure(config, summary, figures)
        bar.update()
        convergence_table, curves_path = convergence_section(config, results, figures)
        bar.update()

    def image(path: Path | None, alt: str) -> str:
        return f"![{alt}]({path.relative_to(folder).as_posix()})" if path else ""

    seeds = config.seeds
    train_px = config.model.image_hw[0]
    compute = sum(r.get("cpu_seconds", r.get("seconds", 0.0)) for r in results.values())
    wall = sum(wall_seconds)
    counts = {outcome: sum(v.outcome == outcome for _, _, v in judged) for outcome in OUTCOMES}
    later = set(results) - first_round
    untrained = {c for c in later if c.train_size == UNTRAINED}
    lines = [
        "# Position-encoding study",
        "",
        f"{len(first_round & set(results))} of the first round's {total} training runs finished ({seeds} seed(s) "
        f"per family, {len(config.families)} families), and {len(later - untrained)} in later rounds for "
        f"the claims still undecided (up to {rule.rounds[-1]} seeds), with {len(untrained)} initial tables probed "
        "untrained for the claims about tables before training; "
        f"{config.train_size}/{config.val_size}/{config.test_size} "
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
        + ". Each claim is a quantity measured per seed, tested against a bound at a few looks: after the first "
        f"round of seeds ({', '.join(map(str, rule.rounds))} seeds by the end of each round), a claim still undecided "
        "gets its runs on more seeds. Each look computes a skewness-corrected t interval of the mean (Hall 1992) at "
        f"level {100 * rule.level:.2f}%, Bonferroni over the {len(rule.rounds)} looks with a factor {RESERVE} in "
        f"reserve for skewed values, so a wrong-side verdict has a chance of at most {100 * rule.alpha:g}% over all "
        "looks when the true mean sits on the bound (checked by simulation in the tests). A claim is reproduced at the "
        "first look whose interval lies wholly on its side, contradicted when it lies wholly on the other side; a "
        "claimed gain is contradicted when its interval lies wholly below the smallest gain the claim implies (half "
        "the gain the paper prints, or 2 points, 0.02 of R² or of cosine for a gain read off a figure), so a gain "
        "that is absent is a finding, not a wait for more seeds. Otherwise a claim is inconclusive, with the seeds "
        "that would decide it if the spread held, and it stops early as no effect at this spread when that is "
        f"more than {rule.limit} (twice the most seeds a claim gets). A run that stopped short (its final "
        "training metric and its best validation metric both below the learned level: at chance, or on a plateau "
        "part-way) while runs of the same family and task learned it on other seeds failed to train: the claims "
        "resting on it are decided on the seeds that trained, and the failures are counted (see Convergence). A "
        "claim that is not reproduced while some of its seeds rest on runs that ended at the cap still improving, "
        "even after the longer cap, is "
        "*not converged*. Accuracy in %, R² as is; differences are paired by seed.",
        "",
        verdict_table(judged),
        "",
        *(line for source, path in claim_paths.items() for line in (image(path, source), "")),
        "## Location tasks (thesis Tables 1, 3, 4)",
        "",
        f"Test metrics after training on each red-green task, mean ± std over every seed run (the first round's "
        f"{seeds}, more where a claim's later rounds trained them): accuracy in % "
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
        f"{config.epochs} epochs of {config.train_size} images are the cap. A run that ends at the cap still "
        f"improving trains again from its start with a cap {config.extend} times longer (every run alike, the "
        "learning-rate trials included). A run is flagged when it stopped at the cap (after that), or when its "
        f"final training accuracy and its best validation accuracy are both within {CHANCE_MARGIN:g} points of "
        f"chance (R² below {CHANCE_R2:g}). A run stopped short when both stayed below the learned level (90%, "
        "R² 0.8); where other seeds of its family and task learned it, it failed to train, and the table counts "
        "it. "
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
    rates = rates_table(config, results)
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
        _rate_line(config),
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
    write_atomic(report, "\n".join(lines) + "\n")
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


def _rate_line(config: StudyConfig) -> str:
    """The setup's line on how the learning rates were chosen."""
    if not config.tries_rates:
        lr = config.lr_grid[0] if config.lr_grid else config.lr
        return f"- learning rate: {lr} for every family and task (a grid of one rate: no trial trained)"
    return (
        "- learning rate: per family and training task, the best validation metric of "
        + ", ".join(map(str, config.lr_grid))
        + f" by its mean over the data of seeds {', '.join(map(str, config.rate_seeds))} (not reported), chosen "
        "once with the stopping rule above; a pretrained family uses the rates of its model trained from "
        "scratch, and its pretraining the direction rate"
    )
