"""Jobs of cells and the processes that run them: grouping, the pretraining they wait for, workers, progress."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

from ..ownership import continue_recording, current_recorder
from .cells import Cell
from .execute import training_key
from .families import Family
from .folder import pretrained_path
from .plan import JobOptions, Results, StudyPlan

__all__ = ["work", "threads_per_worker", "jobs_of", "Schedule", "Progress", "run_jobs", "worker_pool"]


def work(cells: list[Cell], family: Family, plan: StudyPlan, job: JobOptions) -> Results:
    """Run one job (in a worker process, or in this one)."""
    if job.threads:
        torch.set_num_threads(job.threads)
    return plan.run_cells(cells, family, job)


def threads_per_worker(device: str, workers: int) -> int:
    """Threads per worker process: one on a CPU, so that a run's sums are added in the same order on
    any machine and under any --workers (a rerun on one machine repeats every number)."""
    return 1 if device == "cpu" else max(1, (os.cpu_count() or 1) // workers)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` processes, started by spawn: a fork after torch has started threads (or CUDA) can deadlock;
    each records the files it writes as this process does (:mod:`vitpos.ownership`)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=continue_recording,
        initargs=(current_recorder(),),
    )


def jobs_of(cells: list[Cell], ensemble_families: set[str]) -> list[list[Cell]]:
    """Cells grouped into jobs, in the order of ``cells`` (seed by seed).

    A job trains once per distinct training (twins of :data:`~.execute.TRAINS_AS` share one);
    for a family in ``ensemble_families`` one job holds every seed of every task at every training-set
    size (the tasks share the model's shape, each trains at its own learning rate, and every size gets
    the same cap of optimiser steps), trained as one stacked ensemble: 90 runs in ``--full``'s first round
    (10 seeds of 3 tasks at 5,000 images and of 2 at each of the 3 smaller sizes), 180 members with the runs'
    twins on the longer cap.
    """
    jobs: dict[tuple, list[Cell]] = {}
    for cell in cells:
        key = (cell.family,) if cell.family in ensemble_families else training_key(cell)
        jobs.setdefault(key, []).append(cell)
    return list(jobs.values())


class Schedule:
    """Jobs ready to run, and jobs that wait for their family's pretrained encoding."""

    def __init__(self, jobs: list[list[Cell]], families: dict[str, Family], folder: Path) -> None:
        self.init: dict[str, str] = {}
        self.to_pretrain: list[Family] = []
        waiting: dict[str, list[list[Cell]]] = {}
        for label, family in families.items():
            if family.pretrained:
                path = pretrained_path(folder, family)
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


class Progress:
    """Log each finished cell with the time left, extrapolated from this invocation's wall time per cell."""

    def __init__(
        self, todo: list[Cell], describe: Callable[[Cell, dict[str, Any]], str], log: Callable[[str], None]
    ) -> None:
        self.left = set(todo)
        self.describe = describe
        self.todo = len(todo)
        self.log = log
        self.began = time.perf_counter()

    def done(self, job: Results, finished: int, total: int) -> None:
        """Log the cells of a finished job."""
        self.left -= set(job)
        elapsed = time.perf_counter() - self.began
        eta = elapsed / max(self.todo - len(self.left), 1) * len(self.left)
        for i, (cell, result) in enumerate(job.items()):
            count = finished - len(job) + i + 1
            self.log(f"[{count:4d}/{total}] {self.describe(cell, result)}  ~{eta / 60:.1f} min left")


def run_jobs(
    schedule: Schedule,
    families: dict[str, Family],
    plan: StudyPlan,
    folder: Path,
    device: str,
    rates: dict[str, dict[str, float]],
    stacked: set[str],
    workers: int,
    finished: Callable[[Results], None],
    log: Callable[[str], None],
    compile: bool = False,
) -> None:
    """Run every job of ``schedule``, pretraining first, at each family's ``rates`` (by label), the
    families in ``stacked`` as ensembles; ``workers`` at a time: in this process when 1, else each
    job in a worker process (on CUDA too: several ensembles in flight, each process launching its own)."""
    threads = threads_per_worker(device, workers) if workers > 1 else None

    def job_of(label: str) -> JobOptions:
        init = schedule.init.get(label)
        return JobOptions(device, init, label in stacked, rates.get(label, {}), threads=threads, compile=compile)

    if workers <= 1:
        for family in list(schedule.to_pretrain):
            path = pretrained_path(folder, family)
            log(plan.pretrain(path, family, rates.get(family.label, {}), device, None))
            schedule.pretrained(family, path)
        for cells in schedule.ready:
            finished(work(cells, families[cells[0].family], plan, job_of(cells[0].family)))
        return
    with worker_pool(workers) as pool:
        pending: dict[Future, list[Cell] | Family] = {}
        for family in schedule.to_pretrain:
            path = pretrained_path(folder, family)
            pending[pool.submit(plan.pretrain, path, family, rates.get(family.label, {}), device, threads)] = family
        try:
            while schedule.ready or pending:
                while schedule.ready and len(pending) < workers:
                    cells = schedule.ready.pop(0)
                    label = cells[0].family
                    pending[pool.submit(work, cells, families[label], plan, job_of(label))] = cells
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    item = pending.pop(future)
                    if isinstance(item, Family):
                        log(future.result())
                        schedule.pretrained(item, pretrained_path(folder, item))
                    else:
                        finished(future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise
