"""Run a whole study into a folder: pretrain where needed, run every unfinished cell, write the report.

The folder holds ``study.json`` (the settings), ``rates.json`` (the learning rate chosen per family
and task, :mod:`.rates`), ``cells/`` (one JSON per finished training run), ``pretrained/``
(pretrained encodings), ``figures/``, ``results.json`` and ``report.md``.
Running the same study into the same folder again skips every finished cell, so an
interrupted study continues where it stopped; a folder that holds a study with other settings
is refused rather than mixed. The loop is the same for every study: a :class:`~.plan.StudyPlan`
(the red-green study, :class:`RedGreenStudy`; the detection and segmentation studies, :mod:`.dense`) says what its
cells are, how they train and what the report holds.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import HostConfig
from ..engine.config import TrainConfig
from ..engine.ensemble import stack_error
from ..errors import VitposError, quote
from ..files import write_json
from ..models.factory import create_model
from ..pretrain import pretrain_position_encoding
from .cells import Cell, CellStore
from .execute import TRAINS_AS, run_cells
from .families import Family, split_available
from .plan import Results, StudyPlan
from .protocol import StudyConfig
from .rates import Rates, rate_key, rate_trials
from .report import write_report

__all__ = ["run_study", "RedGreenStudy", "StudyFolderError"]

SETTINGS_FILE = "study.json"


class StudyFolderError(VitposError):
    """The output folder holds a study with other settings."""


def _settings(config: StudyPlan) -> dict[str, Any]:
    """What every cell's result depends on; the seed count and the family list may change between runs."""
    out = config.to_dict()
    out.pop("seeds")
    out["families"] = {f["label"]: f for f in out.pop("families")}
    return out


def _check_folder(folder: Path, config: StudyPlan) -> None:
    """Record the settings, or check them against the ones already recorded."""
    path = folder / SETTINGS_FILE
    settings = _settings(config)
    if path.is_file():
        saved = json.loads(path.read_text())
        differ = sorted(k for k in settings if k != "families" and saved.get(k) != settings[k])
        known = saved.get("families", {})
        if not isinstance(known, dict):  # an older detection study's list of labels
            differ, known = [*differ, "families"], {}
        differ += [
            f"family {label}" for label, f in settings["families"].items() if label in known and known[label] != f
        ]
        if differ:
            raise StudyFolderError(
                f"{folder} holds a study with other settings ({', '.join(differ)}); "
                "choose another --out, or pass --fresh to start this folder over"
            )
        settings["families"] = {**known, **settings["families"]}
    write_json(path, settings)


def _earlier_wall(folder: Path) -> list[float]:
    """Wall seconds of the earlier invocations of the study in ``folder`` (from its ``results.json``)."""
    try:
        return list(json.loads((folder / "results.json").read_text()).get("wall_seconds", []))
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def _pretrained_path(folder: Path, family: Family) -> Path:
    return folder / "pretrained" / f"{family.label}.safetensors"


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


def _work(
    cells: list[Cell],
    family: Family,
    config: StudyPlan,
    device: str,
    init_pe: str | None,
    threads: int | None,
    ensemble: bool,
    rates: dict[str, float],
    extras: bool = True,
) -> dict[Cell, dict[str, Any]]:
    if threads:
        torch.set_num_threads(threads)
    return config.run_cells(
        cells, family, device=device, init_pe=init_pe, ensemble=ensemble, rates=rates, extras=extras
    )


def _select_rates(
    plan: RedGreenStudy, folder: Path, device: str, workers: int, log: Callable[[str], None]
) -> dict[str, dict[str, float]]:
    """Family label -> training task -> its learning rate, choosing (and recording) what ``rates.json`` lacks."""
    config = plan.config
    rates = Rates(folder)
    trials = rate_trials(config)
    todo = [
        (key, family, cell, lr)
        for key, (family, cells) in trials.items()
        for cell in cells
        for lr in config.lr_grid
        if not rates.has(key, cell.task, lr)
    ]
    if todo:
        log(f"choosing learning rates: {len(todo)} trial runs (grid {', '.join(map(str, config.lr_grid))})")

    def record(trial: tuple[str, Family, Cell, float], result: dict[Cell, dict[str, Any]]) -> None:
        key, family, cell, lr = trial
        rates.add(key, family.label, cell.task, lr, result[cell])
        r = result[cell]
        log(f"  rate trial {family.label} {cell.task} lr {lr:g}: val {r['val']:.3f} after {r['steps']} steps")

    args = [(([cell], family, plan, device, None), {cell.task: lr}) for _, family, cell, lr in todo]
    if workers <= 1:
        for trial, (head, rate) in zip(todo, args, strict=True):
            record(trial, _work(*head, None, False, rate, False))
    else:
        threads = _threads(device, workers)
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {
                pool.submit(_work, *head, threads, False, rate, False): trial
                for trial, (head, rate) in zip(todo, args, strict=True)
            }
            for future in futures:
                record(futures[future], future.result())
    chosen = {}
    for family in config.families:
        chosen[family.label] = rates.chosen(rate_key(family), config.lr_grid)
        if todo:
            log(
                f"learning rates of {family.label}: "
                + ", ".join(f"{t} {lr:g}" for t, lr in chosen[family.label].items())
            )
    return chosen


def _describe(cell: Cell, result: dict[str, Any]) -> str:
    value = result["test"]
    shown = f"acc {100 * value:5.1f}%" if result["metric"] == "accuracy" else f"R² {value:6.3f}"
    return f"{cell}: {shown}"


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

    def to_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    def choose_rates(
        self, folder: Path, device: str, workers: int, log: Callable[[str], None]
    ) -> dict[str, dict[str, float]]:
        return _select_rates(self, folder, device, workers, log) if self.config.lr_grid else {}

    def pretrain(self, path: Path, family: Family, rates: dict[str, float], device: str, threads: int | None) -> str:
        lr = rates.get("direction", self.config.lr)
        return _pretrained_line(family.label, _pretrain(path, family, self.config, device, lr, threads))

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
        return run_cells(
            cells, family, self.config, device=device, init_pe=init_pe, rates=rates, ensemble=ensemble, extras=extras
        )

    def describe(self, cell: Cell, result: dict[str, Any]) -> str:
        return _describe(cell, result)

    def write_report(
        self, folder: Path, results: Results, *, missing: dict[str, list[str]], wall_seconds: list[float], command: str
    ) -> Path:
        return write_report(folder, self.config, results, missing=missing, wall_seconds=wall_seconds, command=command)


def jobs_of(cells: list[Cell], ensemble_families: set[str]) -> list[list[Cell]]:
    """Cells grouped into jobs, in the order of ``cells`` (seed by seed).

    A job trains once per distinct training (twins of :data:`~.execute.TRAINS_AS` share one);
    for a family in ``ensemble_families`` one job holds every seed of one training task and
    training-set size (one learning rate), trained as one stacked ensemble.
    """
    jobs: dict[tuple, list[Cell]] = {}
    for cell in cells:
        key: tuple[str, str, int] | tuple[str, str, int, int]
        if cell.family in ensemble_families:
            key = (cell.family, TRAINS_AS.get(cell.task, cell.task), cell.train_size)
        else:
            key = (cell.family, TRAINS_AS.get(cell.task, cell.task), cell.train_size, cell.seed)
        jobs.setdefault(key, []).append(cell)
    return list(jobs.values())


class _Schedule:
    """Jobs ready to run, and jobs that wait for their family's pretrained encoding."""

    def __init__(self, jobs: list[list[Cell]], families: dict[str, Family], folder: Path) -> None:
        self.init: dict[str, str] = {}
        self.to_pretrain: list[Family] = []
        waiting: dict[str, list[list[Cell]]] = {}
        for label, family in families.items():
            if family.pretrained:
                path = _pretrained_path(folder, family)
                if path.is_file():
                    self.init[label] = str(path)
                elif any(job[0].family == label for job in jobs):
                    self.to_pretrain.append(family)
                    waiting[label] = []
        self.ready = [job for job in jobs if job[0].family not in waiting]
        for job in jobs:
            if job[0].family in waiting:
                waiting[job[0].family].append(job)
        self._waiting = waiting

    def pretrained(self, family: Family, path: Path) -> None:
        """The encoding of ``family`` exists: its jobs may run."""
        self.init[family.label] = str(path)
        self.ready += self._waiting.pop(family.label)


def _threads(device: str, workers: int) -> int:
    """Threads per worker process: one on a CPU, so that a run's sums are added in the same order on
    any machine and under any --workers (a rerun on one machine repeats every number)."""
    return 1 if device == "cpu" else max(1, (os.cpu_count() or 1) // workers)


def resolve_device(name: str) -> str:
    """``auto`` is ``cuda`` where a GPU is present, else ``cpu``; other names pass through."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: no CUDA device is available here; use --device cpu or auto")
    return name


def _ensemble_families(
    families: dict[str, Family], config: StudyPlan, device: str, log: Callable[[str], None]
) -> set[str]:
    """The families whose models train as stacked ensembles on ``device`` (the others: one model at a time)."""
    out = set()
    for label, family in families.items():
        model = create_model(family.model_config(config.model, num_classes=2)).to(device).train()
        error = stack_error(model)
        if error:
            log(f"family {label}: one model at a time, as its model cannot run under torch.vmap ({error[:120]})")
        else:
            out.add(label)
    return out


def run_study(
    config: StudyConfig | StudyPlan,
    folder: str | Path,
    *,
    command: str = "vitpos study",
    workers: int = 1,
    device: str = "cpu",
    ensemble: bool | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Run every unfinished cell of ``config`` (the red-green study's settings, or any
    :class:`~.plan.StudyPlan`) into ``folder`` and write the report; returns its path.

    ``workers`` > 1 trains that many jobs at once in separate processes with one thread each
    (pretraining included), which uses several CPU cores better than threads inside one small model.
    Learning rates are chosen first (:mod:`.rates`). ``ensemble`` trains the seeds of one family,
    task and training-set size as one stacked ensemble; the default (None) does so on CUDA only,
    where it fills the GPU, and not on a CPU, where it measured slower than one model at a time
    (BENCHMARKS.md).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise VitposError(f"run_study: workers = {quote(workers)}; expected an integer >= 1 (jobs at once)")
    folder = Path(folder)
    plan: StudyPlan = RedGreenStudy(config) if isinstance(config, StudyConfig) else config
    device = resolve_device(device)
    ensemble = device.startswith("cuda") if ensemble is None else ensemble
    available, missing = split_available(plan.families)
    for family in available:
        family.check_builds(plan.model)
    for label, values in missing.items():
        log(f"skipping family {label}: {', '.join(values)} not available in this installation")
    if not available:
        raise ValueError(
            "none of the study's families can run here: "
            + "; ".join(f"{k} ({', '.join(v)})" for k, v in missing.items())
        )
    runnable = plan.with_families(tuple(available))
    _check_folder(folder, runnable)
    store = CellStore(folder / "cells")
    start = time.perf_counter()
    families = {f.label: f for f in runnable.families}
    cells = runnable.cells()
    results = {c: r for c in cells if (r := store.load(c)) is not None}
    todo = [c for c in cells if c not in results]
    stacked = _ensemble_families(families, runnable, device, log) if ensemble else set()
    jobs = jobs_of(todo, stacked)
    schedule = _Schedule(jobs, families, folder)
    log(
        f"{len(cells)} {runnable.runs} runs: {len(results)} already done, {len(todo)} to go in {len(jobs)} jobs, "
        f"{workers} at a time on {device}"
        + (" (stacked ensembles)" if stacked else "")
        + (f"; first pretraining {', '.join(f.label for f in schedule.to_pretrain)}" if schedule.to_pretrain else "")
    )
    progress = _Progress(todo, runnable.describe, log)

    def finished(job_results: dict[Cell, dict[str, Any]]) -> None:
        for cell, result in job_results.items():
            store.save(cell, result)
            results[cell] = result
        progress.done(job_results, len(results), len(cells))

    threads_before = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        rates = runnable.choose_rates(folder, device, workers, log) if todo else {}
        if workers <= 1:
            for family in list(schedule.to_pretrain):
                path = _pretrained_path(folder, family)
                log(runnable.pretrain(path, family, rates.get(family.label, {}), device, None))
                schedule.pretrained(family, path)
            for job in schedule.ready:
                label = job[0].family
                init = schedule.init.get(label)
                finished(
                    _work(job, families[label], runnable, device, init, None, label in stacked, rates.get(label, {}))
                )
        else:
            _run_parallel(schedule, families, runnable, folder, device, workers, stacked, rates, finished, log)
    finally:
        torch.set_num_threads(threads_before)
        seconds = time.perf_counter() - start
        report = runnable.write_report(
            folder,
            results,
            missing=missing,
            wall_seconds=[*_earlier_wall(folder), *([seconds] if todo else [])],
            command=command,
        )
    log(f"wrote {report} ({len(results)}/{len(cells)} runs, {seconds / 60:.1f} min)")
    return report


class _Progress:
    """Log each finished cell with the time left, extrapolated from this invocation's wall time per cell."""

    def __init__(
        self, todo: list[Cell], describe: Callable[[Cell, dict[str, Any]], str], log: Callable[[str], None]
    ) -> None:
        self.left = set(todo)
        self.describe = describe
        self.todo = len(todo)
        self.log = log
        self.began = time.perf_counter()

    def done(self, job: dict[Cell, dict[str, Any]], finished: int, total: int) -> None:
        """Log the cells of a finished job."""
        self.left -= set(job)
        elapsed = time.perf_counter() - self.began
        eta = elapsed / max(self.todo - len(self.left), 1) * len(self.left)
        for i, (cell, result) in enumerate(job.items()):
            count = finished - len(job) + i + 1
            self.log(f"[{count:4d}/{total}] {self.describe(cell, result)}  ~{eta / 60:.1f} min left")


def _run_parallel(
    schedule: _Schedule,
    families: dict[str, Family],
    config: StudyPlan,
    folder: Path,
    device: str,
    workers: int,
    stacked: set[str],
    rates: dict[str, dict[str, float]],
    finished: Callable[[dict[Cell, dict[str, Any]]], None],
    log: Callable[[str], None],
) -> None:
    """Keep ``workers`` processes busy: pretraining first, each family's jobs once its encoding exists."""
    threads = _threads(device, workers)
    context = multiprocessing.get_context("spawn")  # fork after torch has started threads can deadlock
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: dict[Future, list[Cell] | Family] = {}
        for family in schedule.to_pretrain:
            path = _pretrained_path(folder, family)
            pending[pool.submit(config.pretrain, path, family, rates.get(family.label, {}), device, threads)] = family
        try:
            while schedule.ready or pending:
                while schedule.ready and len(pending) < workers:
                    job = schedule.ready.pop(0)
                    label = job[0].family
                    init = schedule.init.get(label)
                    pending[
                        pool.submit(
                            _work,
                            job,
                            families[label],
                            config,
                            device,
                            init,
                            threads,
                            label in stacked,
                            rates.get(label, {}),
                        )
                    ] = job
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    work = pending.pop(future)
                    if isinstance(work, Family):
                        log(future.result())
                        schedule.pretrained(work, _pretrained_path(folder, work))
                    else:
                        finished(future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise
