"""The detection study: iRPE's Table 6 claims on ``synthetic:detect`` with tiny DETRs (``vitpos study --task detect``).

Each family is a ``detr_tiny_*`` preset (a Table 6 row) on images of up to 32 x 32 pixels, each of
its own size and aspect ratio (sides 24 to 32, ``vary``; up to an 8 x 8 encoder grid), padded per
batch with a padding mask as DETR's batches are, small enough to train on a CPU. Every (family,
seed) cell trains with the engine on the same images and steps; its test AP is measured at the
training size and, without fine-tuning, at ``long_size`` (a 16 x 16 grid by default). The
piecewise-against-clip claim (§4.2: the two differ once offsets exceed the buckets) is tested at the
training size, where offsets reach 7 and the clip's beta is 4: the models do not transfer to
``long_size`` (AP near 0 for every family in the default study), where a comparison would be
vacuous; the table reports that AP.
:class:`DetectStudyConfig` is a :class:`~.plan.StudyPlan`: :func:`~.run.run_study` runs its cells
(one JSON each, so an interrupted study continues) and the claims get verdicts from the same
bootstrap test as the main study (:mod:`.verdicts`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import HostConfig
from ..data.synthetic_detect import SyntheticDetection
from ..engine.config import TrainConfig
from ..engine.evaluate import evaluate
from ..engine.train import train
from ..files import write_json
from ..models.factory import get_config
from ..tasks import primary_metric
from .cells import Cell
from .claims import Claim, difference, evaluate_claims, fmt_value
from .families import Family
from .plan import Results

__all__ = ["DETECT_FAMILIES", "DETECT_CLAIMS", "DetectStudyConfig"]

TASK = "detect"
DETECT_FAMILIES = {
    "sine": "detr_tiny_sine",
    "none": "detr_tiny_none",
    "sine_irpe_bias": "detr_tiny_sine_irpe_bias",
    "irpe_ctx": "detr_tiny_irpe_ctx",
    "sine_irpe_ctx": "detr_tiny_sine_irpe_ctx",
    "sine_irpe_ctx_clip": "detr_tiny_sine_irpe_ctx_clip",
}
"""Family label -> preset (iRPE Table 6 rows #1, #2, #3, #4, #6, #5)."""


def detect_family(label: str) -> Family:
    """The family ``label`` of :data:`DETECT_FAMILIES`: its preset's four slots."""
    if label not in DETECT_FAMILIES:
        raise ValueError(f"unknown detection famil(ies) {label}; valid: {', '.join(DETECT_FAMILIES)}")
    return Family(label, get_config(DETECT_FAMILIES[label]).position.to_dict())


@dataclass(frozen=True)
class DetectStudyConfig:
    """Every setting of a detection study; a :class:`~.plan.StudyPlan` for :func:`~.run.run_study`."""

    families: tuple[Family, ...] = field(default_factory=lambda: tuple(map(detect_family, DETECT_FAMILIES)))
    """Families of :data:`DETECT_FAMILIES` (their labels are accepted)."""
    seeds: int = 2
    train_size: int = 800
    val_size: int = 100
    test_size: int = 200
    img_size: int = 32
    """Largest training image size; the stem's stride is 4, so the encoder sees up to an 8 x 8 grid."""
    vary: float = 0.25
    """Each image's sides are drawn between ``(1 - vary) * img_size`` and ``img_size`` (batches are padded)."""
    long_size: int = 64
    """Evaluation size for the long-sequence claim (16 x 16 = 256 tokens)."""
    objects: int = 3
    min_size: int = 4
    max_size: int = 10
    epochs: int = 10
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-4
    grad_clip: float = 0.1
    """DETR's gradient-norm clip."""

    runs = "detection"

    def __post_init__(self) -> None:
        labels = [f if isinstance(f, str) else f.label for f in self.families]
        unknown = sorted(set(labels) - set(DETECT_FAMILIES))
        if unknown:
            raise ValueError(f"unknown detection famil(ies) {', '.join(unknown)}; valid: {', '.join(DETECT_FAMILIES)}")
        object.__setattr__(self, "families", tuple(detect_family(label) for label in labels))
        for name in ("seeds", "train_size", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.img_size % 4 or self.long_size % 4:
            raise ValueError(
                f"img_size ({self.img_size}) and long_size ({self.long_size}) must be multiples of the stride 4"
            )

    @property
    def model(self) -> HostConfig:
        """The tiny DETR at the study's image size; each family sets its four slots."""
        return get_config(DETECT_FAMILIES["sine"], img_size=self.img_size)

    def with_families(self, families: tuple[Family, ...]) -> DetectStudyConfig:
        return dataclasses.replace(self, families=families)

    def data(self, seed: int) -> SyntheticDetection:
        return SyntheticDetection(
            img_size=self.img_size,
            vary=self.vary,
            objects=self.objects,
            min_size=self.min_size,
            max_size=self.max_size,
            train=self.train_size,
            val=self.val_size,
            test=self.test_size,
            seed=seed,
        )

    def cells(self) -> list[Cell]:
        """Seed by seed, so a study cut short has whole seeds for every family."""
        return [Cell(f.label, TASK, self.train_size, seed) for seed in range(self.seeds) for f in self.families]

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "families": [f.to_dict() for f in self.families]}

    def choose_rates(
        self, folder: Path, device: str, workers: int, log: Callable[[str], None]
    ) -> dict[str, dict[str, float]]:
        """None to choose: every family trains at ``lr``."""
        return {}

    def pretrain(self, path: Path, family: Family, rates: dict[str, float], device: str, threads: int | None) -> str:
        """Never asked: no detection family has a pretrained encoding."""
        raise ValueError(f"family {family.label}: the detection study has no pretrained encodings")

    def run_cells(
        self,
        cells: list[Cell],
        family: Family,
        *,
        device: str,
        init_pe: str | None,
        ensemble: bool,
        rates: dict[str, float],
        extras: bool = True,
    ) -> Results:
        """Train each cell (at ``lr``, or its rate in ``rates``); AP (%) on the test split at the training
        size and at ``long_size``."""
        return {cell: self._run_cell(cell, family, device, rates.get(cell.task, self.lr)) for cell in cells}

    def _run_cell(self, cell: Cell, family: Family, device: str, lr: float) -> dict[str, Any]:
        start, cpu_start = time.perf_counter(), time.process_time()
        task = self.data(cell.seed)
        train_cfg = TrainConfig(
            data=task.spec, epochs=self.epochs, batch_size=self.batch_size, lr=lr,
            weight_decay=self.weight_decay, warmup_epochs=0.5, grad_clip=self.grad_clip, seed=cell.seed,
            device=device, eval_every=self.epochs, progress=False,
        )  # fmt: skip
        data = task.splits()
        metric = primary_metric(data.info.task)
        result = train(family.model_config(self.model), train_cfg, data)
        long = evaluate(result.model, data.test.at_size(self.long_size), batch_size=64, device=device)
        return {
            "metric": metric,
            "test": result.test[metric],
            "test_metrics": result.test,
            "long": long[metric],
            "long_metrics": long,
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu_start,
        }

    def describe(self, cell: Cell, result: dict[str, Any]) -> str:
        return (
            f"{cell}: AP {result['test']:.1f} (at {self.long_size} px: {result['long']:.1f}), {result['seconds']:.0f} s"
        )

    def write_report(
        self, folder: Path, results: Results, *, missing: dict[str, list[str]], wall_seconds: list[float], command: str
    ) -> Path:
        """``report.md`` and ``results.json``: AP per family and a verdict per claim."""
        return _write_report(folder, self, results, wall_seconds, command)


def _ap(family: str) -> Callable:
    """Test AP (%) of ``family`` per seed, at the training size."""

    def measure(results: dict, full: int, _: tuple[int, ...]) -> dict[int, float]:
        return {c.seed: r["test"] for c, r in results.items() if c.family == family and c.task == TASK}

    return measure


DETECT_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "iRPE Table 6 #1 vs #2",
        "DETR without a position encoding is far worse",
        "39.5 vs 30.4 (-9.1)",
        "sine - none AP, points",
        ">",
        0.0,
        difference(_ap("sine"), _ap("none")),
        ("sine", "none"),
    ),
    Claim(
        "iRPE Table 6 #1 vs #4",
        "a relative encoding alone is worse than the absolute one",
        "39.5 vs 38.7 (-0.8)",
        "sine - irpe_ctx AP, points",
        ">",
        0.0,
        difference(_ap("sine"), _ap("irpe_ctx")),
        ("sine", "irpe_ctx"),
    ),
    Claim(
        "iRPE Table 6 #1 vs #6",
        "adding a relative encoding to the absolute one does not hurt (it gains)",
        "40.8 vs 39.5 (+1.3)",
        "sine_irpe_ctx - sine AP, points",
        ">",
        -1.0,
        difference(_ap("sine_irpe_ctx"), _ap("sine")),
        ("sine_irpe_ctx", "sine"),
    ),
    Claim(
        "iRPE Table 6 #1 vs #3",
        "a relative bias added to the absolute encoding does not hurt (it gains)",
        "40.6 vs 39.5 (+1.1)",
        "sine_irpe_bias - sine AP, points",
        ">",
        -1.0,
        difference(_ap("sine_irpe_bias"), _ap("sine")),
        ("sine_irpe_bias", "sine"),
    ),
    Claim(
        "iRPE Table 6 #5 vs #6, §4.2",
        "the piecewise index is at least as good as clipping on long sequences",
        "40.8 vs 40.4 (+0.4)",
        "sine_irpe_ctx - sine_irpe_ctx_clip AP, points",
        ">",
        -1.0,
        difference(_ap("sine_irpe_ctx"), _ap("sine_irpe_ctx_clip")),
        ("sine_irpe_ctx", "sine_irpe_ctx_clip"),
    ),
)
"""Table 6's conclusions as tests: a gap above 0 for "worse"; non-inferiority within 1 AP point for
"does not hurt" and "at least as good" (the paper's gains are 0.4-1.3 points, below what a small
synthetic study can resolve)."""


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "—"
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return f"{np.mean(values):.1f}" + ("" if math.isnan(sd) else f" ± {sd:.1f}")


def _write_report(folder: Path, config: DetectStudyConfig, results: Results, wall: list[float], command: str) -> Path:
    families = {f.label for f in config.families}
    verdicts = evaluate_claims(results, config.train_size, (), families, DETECT_CLAIMS)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in results.values())
    lines = [
        "# Detection study: iRPE Table 6 on synthetic:detect",
        "",
        f"`{command}` — {len(results)} runs, {sum(wall) / 60:.1f} min wall over {len(wall)} invocation(s) "
        f"that trained, {cpu / 60:.1f} CPU-min in all.",
        "",
        f"Tiny DETRs (width 64, 2 + 2 layers, 8 queries, stride-4 stem) on {config.train_size} images of up to "
        f"{config.img_size} x {config.img_size} px (each side from {config.data(0).smallest[0]} px, padded "
        f"batches) with 1-{config.objects} squares of "
        f"{config.min_size}-{config.max_size} px, {config.epochs} epochs, batch {config.batch_size}, "
        f"lr {config.lr:g}; {config.seeds} seeds. "
        f"COCO AP (%) on {config.test_size} test images, mean ± sd over seeds.",
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
    lines += [
        "",
        "## AP per family",
        "",
        f"| Family | Preset | AP | AP50 | AP75 | AP at {config.long_size} px |",
        "|---|---|---|---|---|---|",
    ]
    for family in (f.label for f in config.families):
        rows = [r for c, r in sorted(results.items()) if c.family == family]
        cols = [_mean_sd([r["test_metrics"][key] for r in rows]) for key in ("AP", "AP50", "AP75")]
        lines.append(
            f"| {family} | `{DETECT_FAMILIES[family]}` | {' | '.join(cols)} | {_mean_sd([r['long'] for r in rows])} |"
        )
    report = folder / "report.md"
    report.write_text("\n".join(lines) + "\n")
    write_json(folder / "results.json", {
        "config": config.to_dict(), "wall_seconds": wall,
        "cells": [{**dataclasses.asdict(c), **r} for c, r in sorted(results.items())],
        "claims": [{"statement": c.statement, "values": vals, **v.to_dict()} for c, vals, v in verdicts],
    })  # fmt: skip
    return report
