"""The red-green study (:class:`~.protocol.StudyConfig`) as the cell loop runs it: learning-rate trials,
pretrained encodings, cells trained and measured by :func:`~.execute.run_cells`, the report of :mod:`.report`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import HostConfig
from ..engine.config import TrainConfig
from ..files import write_json
from ..pretrain import pretrain_position_encoding
from .cells import UNTRAINED, Cell
from .claims import open_claims
from .execute import run_cells, run_trials
from .families import Family
from .plan import JobOptions, RateChoice, Results
from .protocol import StudyConfig
from .rates import Rates, only_rate, rate_key, rate_trials
from .report import write_report
from .schedule import threads_per_worker, worker_pool

__all__ = ["RedGreenStudy"]


def _pretrain(
    path: Path, family: Family, config: StudyConfig, device: str, lr: float, threads: int | None = None
) -> dict[str, Any]:
    """Make the pretrained encoding of ``family`` (seed 0, learning rate ``lr``) at ``path``; returns its summary."""
    if threads:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    model_cfg = family.model_config(config.model)
    train_cfg = TrainConfig(
        epochs=config.pretrain_epochs,
        batch_size=config.batch_size,
        lr=lr,
        weight_decay=config.weight_decay,
        device=device,
        progress=False,
    )
    result = pretrain_position_encoding(
        model_cfg, path, train_cfg, size=config.pretrain_size, probe_folds=config.probe_folds
    )
    summary = {**result.to_dict(), "lr": lr, "seconds": time.perf_counter() - start}
    write_json(path.with_suffix(".json"), summary)
    return summary


def _pretrained_line(label: str, summary: dict[str, Any]) -> str:
    before, after = summary["before"], summary["after"]
    tests = ", ".join(
        f"{task} {v['acc1']:.0f}%" if "acc1" in v else f"{task} R² {v['r2']:.2f}" for task, v in summary["test"].items()
    )
    return (
        f"pretrained {label} (lr {summary['lr']:g}; test {tests}): probes left/right "
        f"{before['left_right']:.2f} -> {after['left_right']:.2f}, "
        f"R² {before['distance_r2']:.2f} -> {after['distance_r2']:.2f} ({summary['seconds']:.0f} s)"
    )


def trial_work(
    trials: list[tuple[Cell, float]],
    family: Family,
    config: StudyConfig,
    device: str,
    ensemble: bool,
    threads: int | None,
    compile: bool = False,
) -> dict[tuple[Cell, float], dict[str, Any]]:
    """Run learning-rate trials (in a worker process, or in this one); stacked where ``ensemble``."""
    if threads:
        torch.set_num_threads(threads)
    return run_trials(trials, family, config, device=device, ensemble=ensemble, compile=compile)


def _select_rates(
    plan: RedGreenStudy,
    folder: Path,
    device: str,
    workers: int,
    log: Callable[[str], None],
    stacked: frozenset[str] = frozenset(),
    compile: bool = False,
) -> RateChoice:
    """Family label -> training task -> its learning rate, choosing (and recording) what ``rates.json`` lacks;
    and the trials' wall seconds per job (a family in ``stacked`` runs all its trials as one stacked
    ensemble, each member at its rate; the others run one trial per job)."""
    config = plan.config
    rates = Rates(folder)
    trials = rate_trials(config)
    todo = [
        (key, family, cell, lr)
        for key, (family, cells) in trials.items()
        for cell in cells
        for lr in config.lr_grid
        if not rates.has(key, cell.task, lr, cell.seed)
    ]
    if todo:
        log(f"choosing learning rates: {len(todo)} trial runs (grid {', '.join(map(str, config.lr_grid))})")

    def record(trial: tuple[str, Family, Cell, float], result: dict[str, Any]) -> None:
        key, family, cell, lr = trial
        rates.add(key, family.label, cell.task, lr, cell.seed, result)
        shown = _shown(result["metric"], result["val"])
        log(
            f"  rate trial {family.label} {cell.task} seed {cell.seed} lr {lr:g}: val {shown} "
            f"after {result['steps']} steps"
        )

    groups: dict[tuple, list[tuple[str, Family, Cell, float]]] = {}
    for i, trial in enumerate(todo):
        groups.setdefault((trial[0],) if trial[1].label in stacked else (trial[0], i), []).append(trial)
    jobs = list(groups.values())
    began = time.perf_counter()
    threads = threads_per_worker(device, workers) if workers > 1 else None
    args = [
        (
            [(cell, lr) for _, _, cell, lr in job],
            job[0][1],
            config,
            device,
            job[0][1].label in stacked,
            threads,
            compile,
        )
        for job in jobs
    ]

    def finished(job: list[tuple[str, Family, Cell, float]], results: dict[tuple[Cell, float], Any]) -> None:
        for trial in job:
            record(trial, results[(trial[2], trial[3])])

    if workers <= 1:
        for job, arg in zip(jobs, args, strict=True):
            finished(job, trial_work(*arg))
    else:
        with worker_pool(workers) as pool:
            futures = {pool.submit(trial_work, *arg): job for job, arg in zip(jobs, args, strict=True)}
            for future in futures:
                finished(futures[future], future.result())
    # seconds per training, as one worker trains them
    per_run = (time.perf_counter() - began) * min(workers, len(jobs)) / len(todo) if jobs else None
    chosen = {}
    for family in config.families:
        chosen[family.label] = rates.chosen(rate_key(family), config.lr_grid, config.rate_seeds)
        if todo:
            log(
                f"learning rates of {family.label}: "
                + ", ".join(f"{t} {lr:g}" for t, lr in chosen[family.label].items())
            )
    return chosen, per_run


def _shown(metric: str, value: float) -> str:
    """An accuracy (a fraction) in %, an R² as a number."""
    return f"acc1 {100 * value:5.1f}%" if metric == "accuracy" else f"R² {value:6.3f}"


def _describe(cell: Cell, result: dict[str, Any]) -> str:
    if cell.train_size == UNTRAINED:
        probes = result["probes"]["before"]
        scores = f"left/right {100 * probes['left_right']:.0f}%, R² {probes['distance_r2']:.2f}"
        return f"{cell.family} {cell.task} seed {cell.seed}: initial table probed ({scores})"
    return f"{cell}: test {_shown(result['metric'], result['test'])}"


@dataclass(frozen=True)
class RedGreenStudy:
    """The main study (:class:`~.protocol.StudyConfig`) as the cell loop runs it: cells trained and measured
    by :func:`~.execute.run_cells`, families pretrained where they ask, the report of :mod:`.report`."""

    config: StudyConfig
    runs = "training"

    @property
    def families(self) -> tuple[Family, ...]:
        return self.config.families

    @property
    def model(self) -> HostConfig:
        return self.config.model

    def with_families(self, families: tuple[Family, ...]) -> RedGreenStudy:
        return RedGreenStudy(dataclasses.replace(self.config, families=families))

    def cells(self) -> list[Cell]:
        return self.config.cells()

    def next_cells(self, results: Results) -> list[Cell]:
        """The runs behind every claim the next round's seeds could decide (:func:`~.claims.open_claims`); a claim
        about tables before training gets untrained cells (:data:`~.cells.UNTRAINED`)."""
        config = self.config
        rule = config.sequential
        families = {f.label for f in config.families}
        out: dict[Cell, None] = {}
        for claim, look in open_claims(results, config.train_size, config.resolutions, families, rule):
            for seed in range(rule.rounds[look - 2], rule.rounds[look - 1]):
                for family, task, size in claim.runs:
                    n = config.train_size if size == "full" else config.train_sizes[0]
                    out[Cell(family, task, n if claim.trains else UNTRAINED, seed)] = None
        return sorted(out, key=lambda c: (c.seed, c.family, c.task, c.train_size))

    def to_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    def choose_rates(
        self,
        folder: Path,
        device: str,
        workers: int,
        log: Callable[[str], None],
        stacked: frozenset[str] = frozenset(),
        compile: bool = False,
    ) -> RateChoice:
        if not self.config.tries_rates:
            return only_rate(self.config), None
        return _select_rates(self, folder, device, workers, log, stacked, compile)

    def pretrain(self, path: Path, family: Family, rates: dict[str, float], device: str, threads: int | None) -> str:
        lr = rates.get("direction", self.config.lr)
        return _pretrained_line(family.label, _pretrain(path, family, self.config, device, lr, threads))

    def run_cells(self, cells: list[Cell], family: Family, job: JobOptions) -> Results:
        return run_cells(
            cells, family, self.config, device=job.device, init_pe=job.init_pe, rates=job.rates,
            ensemble=job.ensemble, extras=job.extras, compile=job.compile,
        )  # fmt: skip

    def describe(self, cell: Cell, result: dict[str, Any]) -> str:
        return _describe(cell, result)

    def write_report(
        self, folder: Path, results: Results, *, missing: dict[str, list[str]], wall_seconds: list[float], command: str
    ) -> Path:
        return write_report(folder, self.config, results, missing=missing, wall_seconds=wall_seconds, command=command)
