"""Run a whole study into a folder: pretrain where needed, run every unfinished cell, write the report.

The folder holds ``study.json`` (the settings), ``rates.json`` (the learning rate chosen per family
and task, :mod:`.rates`), ``cells/`` (one JSON per finished training run), ``pretrained/``
(pretrained encodings), ``figures/``, ``results.json`` and ``report.md``.
Running the same study into the same folder again skips every finished cell, so an
interrupted study continues where it stopped; a folder that holds a study with other settings
is refused rather than mixed (:mod:`.folder`). The loop is the same for every study: a
:class:`~.plan.StudyPlan` (the red-green study, :class:`~.redgreen.RedGreenStudy`; the detection and
segmentation studies, :mod:`.dense`) says what its cells are, how they train and what the report
holds; :mod:`.schedule` groups the cells into jobs and runs them on worker processes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..engine.ensemble import stack_error
from ..errors import VitposError, quote
from ..models.factory import create_model
from .cells import UNTRAINED, Cell, CellStore
from .execute import training_key
from .families import Family, split_available
from .folder import StudyFolderError, check_folder, earlier_wall
from .plan import Results, StudyPlan
from .protocol import StudyConfig
from .redgreen import RedGreenStudy
from .schedule import Progress, Schedule, jobs_of, run_jobs

__all__ = ["run_study", "resolve_device", "stacked_families", "projection", "StudyFolderError"]


def resolve_device(name: str) -> str:
    """``auto`` is ``cuda`` where a GPU is present, else ``cpu``; other names pass through."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: no CUDA device is available here; use --device cpu or auto")
    return name


def stacked_families(
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


def projection(seconds_per_training: float, trainings: int, jobs: int, workers: int) -> str:
    """The log line that projects the wall time of ``trainings`` in ``jobs`` from the learning-rate trials' pace
    per training (a stack's members counted one by one, as a CPU trains them; a GPU stacks them for less)."""
    minutes = seconds_per_training * trainings / max(1, min(workers, jobs)) / 60
    return (
        f"projected wall time: ~{minutes:.1f} min for {trainings} trainings in {jobs} jobs, {workers} at a time "
        f"(the rate trials took {seconds_per_training:.1f} s per training, a stack's members counted one by one; "
        "measurements beyond the validation metric not counted)"
    )


def _saver(store: CellStore, results: Results, progress: Progress, cells: list[Cell]) -> Callable[[Results], None]:
    """What a finished job does: store its cells, add them to ``results`` and log them with the time left."""

    def finished(job_results: Results) -> None:
        for cell, result in job_results.items():
            store.save(cell, result)
            results[cell] = result
        progress.done(job_results, sum(c in results for c in cells), len(cells))

    return finished


def run_study(
    config: StudyConfig | StudyPlan,
    folder: str | Path,
    *,
    command: str = "vitpos study",
    workers: int = 1,
    device: str = "cpu",
    ensemble: bool | None = None,
    compile: bool = False,
    log: Callable[[str], None] = print,
) -> Path:
    """Run every unfinished cell of ``config`` (the red-green study's settings, or any
    :class:`~.plan.StudyPlan`) into ``folder`` and write the report; returns its path.

    ``workers`` > 1 trains that many jobs at once in separate processes (pretraining included):
    with one thread each on a CPU, which uses several cores better than threads inside one small
    model; on CUDA several ensembles in flight, whose launches one process alone would serialise.
    Learning rates are chosen first (:mod:`.rates`), and the wall time of the rest is projected
    from their pace. ``ensemble`` trains the seeds, tasks and training-set sizes of one family
    (and each family's learning-rate trials) as one stacked ensemble; the default (None) does so on
    CUDA only, where it fills the GPU, and not on a CPU, where it measured slower than one model at a
    time (BENCHMARKS.md). ``compile`` compiles each stack's training step
    (:mod:`vitpos.engine.stacked_step`: CUDA graphs on CUDA); opt-in, as no
    GPU measurement has shown it faster yet.
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
    check_folder(folder, runnable)
    store = CellStore(folder / "cells")
    start = time.perf_counter()
    families = {f.label: f for f in runnable.families}
    stacked = stacked_families(families, runnable, device, log) if ensemble else set()
    results: Results = {}
    rates: dict[str, dict[str, float]] | None = None
    ran = False
    threads_before = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        cells = runnable.cells()
        for round_ in itertools.count(1):
            results |= {c: r for c in cells if c not in results and (r := store.load(c)) is not None}
            todo = [c for c in cells if c not in results]
            jobs = jobs_of(todo, stacked)
            schedule = Schedule(jobs, families, folder)
            if round_ == 1 or todo:
                log(
                    ("" if round_ == 1 else f"round {round_}: ")
                    + f"{len(cells)} {runnable.runs} runs: {len(cells) - len(todo)} already done, {len(todo)} to go "
                    f"in {len(jobs)} jobs, {workers} at a time on {device}"
                    + (" (stacked ensembles)" if stacked else "")
                    + (
                        f"; first pretraining {', '.join(f.label for f in schedule.to_pretrain)}"
                        if schedule.to_pretrain
                        else ""
                    )
                )
            if todo:
                if rates is None:
                    rates, per_run = runnable.choose_rates(folder, device, workers, log, frozenset(stacked), compile)
                    if per_run is not None and jobs:
                        trainings = {training_key(c) for c in todo if c.train_size != UNTRAINED}
                        pretraining = len(schedule.to_pretrain)
                        log(projection(per_run, len(trainings) + pretraining, len(jobs) + pretraining, workers))
                run_jobs(
                    schedule,
                    families,
                    runnable,
                    folder,
                    device,
                    rates,
                    stacked,
                    workers,
                    _saver(store, results, Progress(todo, runnable.describe, log), cells),
                    log,
                    compile,
                )
                ran = True
            cells = [c for c in runnable.next_cells(results) if c not in results]
            if not cells:
                break
    finally:
        torch.set_num_threads(threads_before)
        seconds = time.perf_counter() - start
        report = runnable.write_report(
            folder,
            results,
            missing=missing,
            wall_seconds=[*earlier_wall(folder), *([seconds] if ran else [])],
            command=command,
        )
    log(f"wrote {report} ({len(results)} cells, {seconds / 60:.1f} min)")
    return report
