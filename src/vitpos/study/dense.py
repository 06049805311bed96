"""What the dense-prediction studies share: :class:`DenseStudy`, a :class:`~.plan.StudyPlan` whose
cells train one preset-defined family each on a synthetic task of varied-size images.

A study (:mod:`.detect`: iRPE Table 6 with tiny DETRs; :mod:`.segment`: CPVT Table 13 with tiny
Semantic FPNs) names its families (label -> preset), its claims, its data and its report's
columns; this module trains every (family, seed) cell with the engine on the same images and steps,
measures the test split at the training size and, without fine-tuning, at ``long_size``, flags a
run that was still improving when its epochs ran out, and writes the report (claims with their
verdicts and figures, the metric per family) and ``results.json``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..config import HostConfig
from ..data.dataset import DataSplits
from ..engine.config import TrainConfig
from ..engine.evaluate import evaluate
from ..engine.train import train
from ..files import write_atomic, write_json
from ..tasks import primary_metric
from .cells import Cell
from .claims import Claim, Measure, PerSeed, Results, difference, evaluate_claims, fmt_value
from .families import Family
from .figures import save_claim_figures
from .plan import JobOptions, RateChoice

__all__ = ["DenseStudy", "IMPROVING_MARGIN", "still_improving", "gain"]

IMPROVING_MARGIN = 1.0
"""Points by which the last epoch's validation metric must beat every earlier epoch's for a run to
count as still improving when its epochs ran out (flagged: its verdicts read "not converged")."""


def still_improving(curve: list[float]) -> bool:
    """Whether the validation metric per epoch (``curve``) ends more than :data:`IMPROVING_MARGIN` above
    every earlier value."""
    return len(curve) > 1 and curve[-1] > max(curve[:-1]) + IMPROVING_MARGIN


def _per_seed(task: str, family: str) -> Measure:
    """The test metric of ``family`` per seed, at the training size."""

    def measure(results: Results, full: int, _: tuple[int, ...]) -> PerSeed:
        return {c.seed: r["test"] for c, r in results.items() if c.family == family and c.task == task}

    return measure


def gain(task: str, source: str, statement: str, paper: str, unit: str, better: str, worse: str, bound: float) -> Claim:
    """The claim "``better`` - ``worse`` > ``bound``" on the test metric (``unit``), paired by seed."""
    return Claim(
        source, statement, paper, f"{better} - {worse} {unit}, points", ">", bound,
        difference(_per_seed(task, better), _per_seed(task, worse)), (better, worse),
        ((better, task, "full"), (worse, task, "full")),
    )  # fmt: skip


@dataclass(frozen=True)
class DenseStudy:
    """Every setting of a dense-prediction study; a subclass names its task, presets, claims and data."""

    TASK: ClassVar[str]
    """The cells' task name."""
    TITLE: ClassVar[str]
    """The report's heading."""
    PRESETS: ClassVar[dict[str, str]]
    """Family label -> the preset whose slots (and head) it trains."""
    OVERRIDES: ClassVar[dict[str, dict[str, str]]] = {}
    """Family label -> slot values that replace its preset's."""
    CLAIMS: ClassVar[tuple[Claim, ...]]
    STRIDE: ClassVar[int]
    """What ``img_size`` and ``long_size`` must be multiples of."""
    METRIC: ClassVar[str]
    """The test metric's name in the log and the report."""
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]]
    """The report's per-family columns: (header, test metric key)."""
    runs = "training"

    families: tuple[Family, ...] = ()
    """Families of :attr:`PRESETS` (their labels are accepted; empty: all of them)."""
    seeds: int = 2
    train_size: int = 800
    val_size: int = 100
    test_size: int = 200
    img_size: int = 32
    """Largest training image size."""
    vary: float = 0.25
    """Each image's sides are drawn between ``(1 - vary) * img_size`` and ``img_size`` (batches are padded)."""
    long_size: int = 64
    """Evaluation size of the test split drawn anew around a larger size (no fine-tuning)."""
    epochs: int = 10
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-4
    grad_clip: float = 0.1

    def __post_init__(self) -> None:
        labels = [f if isinstance(f, str) else f.label for f in self.families] or list(self.PRESETS)
        unknown = sorted(set(labels) - set(self.PRESETS))
        if unknown:
            raise ValueError(f"unknown {self.runs} famil(ies) {', '.join(unknown)}; valid: {', '.join(self.PRESETS)}")
        object.__setattr__(self, "families", tuple(self.family(label) for label in labels))
        for name in ("seeds", "train_size", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.img_size % self.STRIDE or self.long_size % self.STRIDE:
            raise ValueError(
                f"img_size ({self.img_size}) and long_size ({self.long_size}) must be multiples of the "
                f"stride {self.STRIDE}"
            )

    @classmethod
    def family(cls, label: str) -> Family:
        """The family ``label`` of :attr:`PRESETS`: its preset's slots and head."""
        raise NotImplementedError

    @classmethod
    def preset_text(cls, label: str) -> str:
        """The family ``label`` as the report names it: its preset and the slots it replaces."""
        changes = "".join(f" {k}={v}" for k, v in cls.OVERRIDES.get(label, {}).items())
        return f"`{cls.PRESETS[label]}`{changes}"

    @property
    def model(self) -> HostConfig:
        """The model every family changes."""
        raise NotImplementedError

    def data(self, seed: int) -> Any:
        """The synthetic task of ``seed`` (``.spec``, ``.splits()``)."""
        raise NotImplementedError

    def setup(self) -> str:
        """The report's paragraph on the models and data."""
        raise NotImplementedError

    def with_families(self, families: tuple[Family, ...]) -> DenseStudy:
        return dataclasses.replace(self, families=families)

    def cells(self) -> list[Cell]:
        """Seed by seed, so a study cut short has whole seeds for every family."""
        return [Cell(f.label, self.TASK, self.train_size, seed) for seed in range(self.seeds) for f in self.families]

    def next_cells(self, results: dict[Cell, dict[str, Any]]) -> list[Cell]:
        """None: a dense study runs its seeds in one round."""
        return []

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "families": [f.to_dict() for f in self.families]}

    def choose_rates(
        self,
        folder: Path,
        device: str,
        workers: int,
        log: Callable[[str], None],
        stacked: frozenset[str] = frozenset(),
        compile: bool = False,
    ) -> RateChoice:
        """None to choose: every family trains at ``lr``."""
        return {}, None

    def pretrain(self, path: Path, family: Family, rates: dict[str, float], device: str, threads: int | None) -> str:
        """Never asked: no dense family has a pretrained encoding."""
        raise ValueError(f"family {family.label}: the {self.TASK} study has no pretrained encodings")

    def run_cells(self, cells: list[Cell], family: Family, job: JobOptions) -> Results:
        """Train each cell (at ``lr``, or its rate in ``job.rates``); the test metric at the training size and
        at ``long_size``."""
        return {cell: self._run_cell(cell, family, job.device, job.rates.get(cell.task, self.lr)) for cell in cells}

    def _run_cell(self, cell: Cell, family: Family, device: str, lr: float) -> dict[str, Any]:
        start, cpu_start = time.perf_counter(), time.process_time()
        task = self.data(cell.seed)
        train_cfg = TrainConfig(
            data=task.spec, epochs=self.epochs, batch_size=self.batch_size, lr=lr,
            weight_decay=self.weight_decay, warmup_epochs=0.5, grad_clip=self.grad_clip, seed=cell.seed,
            device=device, progress=False,
        )  # fmt: skip
        data: DataSplits = task.splits()
        metric = primary_metric(data.info.task)
        result = train(family.model_config(self.model), train_cfg, data)
        long = evaluate(result.model, data.test.at_size(self.long_size), batch_size=64, device=device)
        curve = [row[f"val_{metric}"] for row in result.history if row.get(f"val_{metric}") is not None]
        return {
            "metric": metric,
            "test": result.test[metric],
            "test_metrics": result.test,
            "long": long[metric],
            "long_metrics": long,
            "val_curve": curve,
            "flagged": still_improving(curve),
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu_start,
        }

    def describe(self, cell: Cell, result: dict[str, Any]) -> str:
        improving = " (still improving)" if result.get("flagged") else ""
        return (
            f"{cell}: {self.METRIC} {result['test']:.1f} (at {self.long_size} px: {result['long']:.1f}), "
            f"{result['seconds']:.0f} s{improving}"
        )

    def write_report(
        self, folder: Path, results: Results, *, missing: dict[str, list[str]], wall_seconds: list[float], command: str
    ) -> Path:
        """``report.md``, ``figures/claims_*.png`` and ``results.json``: the metric per family, a verdict per claim."""
        return _write_report(folder, self, results, wall_seconds, command)


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "—"
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return f"{np.mean(values):.1f}" + ("" if math.isnan(sd) else f" ± {sd:.1f}")


def _write_report(folder: Path, config: DenseStudy, results: Results, wall: list[float], command: str) -> Path:
    families = {f.label for f in config.families}
    verdicts = evaluate_claims(results, config.train_size, (), families, config.CLAIMS)
    figures = save_claim_figures(folder / "figures", verdicts)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in results.values())
    flagged = sum(bool(r.get("flagged")) for r in results.values())
    lines = [
        f"# {config.TITLE}",
        "",
        f"`{command}` — {len(results)} runs, {sum(wall) / 60:.1f} min wall over {len(wall)} invocation(s) "
        f"that trained, {cpu / 60:.1f} CPU-min in all; {flagged} run(s) still improving at the last epoch "
        f'(validation {config.METRIC} up more than {IMPROVING_MARGIN:g} point: their claims read "not converged" '
        "unless reproduced).",
        "",
        config.setup(),
        "",
        "## Claims",
        "",
        "| Source | Claim | Paper | Quantity | Test | Mean [95% CI] | Verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for claim, _, v in verdicts:
        interval = f"{fmt_value(v.mean, claim)} [{fmt_value(v.low, claim)}, {fmt_value(v.high, claim)}]"
        outcome = v.outcome + (f" (~{v.seeds_needed} seeds would decide)" if v.seeds_needed else "")
        lines.append(
            f"| {claim.source} | {claim.statement} | {claim.paper} | {claim.quantity} | {claim.test} "
            f"| {interval} | {outcome} |"
        )
    lines += ["", *(f"![{source}]({path.relative_to(folder).as_posix()})" for source, path in figures.items())]
    headers = " | ".join(header for header, _ in config.COLUMNS)
    lines += [
        "",
        f"## {config.METRIC} per family",
        "",
        f"| Family | Preset | {headers} | {config.METRIC} at {config.long_size} px |",
        "|---|---|" + "---|" * (len(config.COLUMNS) + 1),
    ]
    for family in config.families:
        rows = [r for c, r in sorted(results.items()) if c.family == family.label]
        cols = [_mean_sd([r["test_metrics"][key] for r in rows]) for _, key in config.COLUMNS]
        lines.append(
            f"| {family.label} | {config.preset_text(family.label)} | {' | '.join(cols)} "
            f"| {_mean_sd([r['long'] for r in rows])} |"
        )
    report = folder / "report.md"
    write_atomic(report, "\n".join(lines) + "\n")
    write_json(folder / "results.json", {
        "config": config.to_dict(), "wall_seconds": wall,
        "cells": [{**dataclasses.asdict(c), **r} for c, r in sorted(results.items())],
        "claims": [{"statement": c.statement, "values": vals, **v.to_dict()} for c, vals, v in verdicts],
    })  # fmt: skip
    return report
