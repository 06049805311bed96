"""Run a whole study into a folder: pretrain where needed, run every unfinished cell, write the report.

The folder holds ``study.json`` (the settings), ``cells/`` (one JSON per finished training
run), ``pretrained/`` (pretrained encodings), ``figures/``, ``results.json`` and ``report.md``.
Running the same study into the same folder again skips every finished cell, so an
interrupted study continues where it stopped; a folder that holds a study with other settings
is refused rather than mixed.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

import torch

from ..engine.config import TrainConfig
from ..files import write_json
from ..pretrain import pretrain_position_encoding
from .cells import Cell, CellStore
from .execute import run_cell
from .families import Family, split_available
from .protocol import StudyConfig
from .report import write_report
from ..errors import VitposError

__all__ = ["run_study", "StudyFolderError"]

SETTINGS_FILE = "study.json"


class StudyFolderError(VitposError):
    """The output folder holds a study with other settings."""


def _settings(config: StudyConfig) -> dict[str, Any]:
    """What every cell's result depends on; the seed count and the family list may change between runs."""
    out = config.to_dict()
    out.pop("seeds")
    out["families"] = {f["label"]: f for f in out.pop("families")}
    return out


def _check_folder(folder: Path, config: StudyConfig) -> None:
    """Record the settings, or check them against the ones already recorded."""
    path = folder / SETTINGS_FILE
    settings = _settings(config)
    if path.is_file():
        saved = json.loads(path.read_text())
        differ = sorted(k for k in settings if k != "families" and saved.get(k) != settings[k])
        differ += [f"family {label}" for label, f in settings["families"].items()
                   if label in saved.get("families", {}) and saved["families"][label] != f]
        if differ:
            raise StudyFolderError(
                f"{folder} holds a study with other settings ({', '.join(differ)}); "
                "choose another --out, or pass --fresh to start this folder over"
            )
        settings["families"] = {**saved.get("families", {}), **settings["families"]}
    write_json(path, settings)


def _pretrained_path(folder: Path, family: Family) -> Path:
    return folder / "pretrained" / f"{family.label}.safetensors"


def _pretrain(path: Path, family: Family, config: StudyConfig, device: str, threads: int | None = None) -> dict[str, Any]:
    """Make the pretrained encoding of ``family`` (seed 0) at ``path``; returns its summary."""
    if threads:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    model_cfg = config.model.replace(**family.model_overrides)
    train_cfg = TrainConfig(epochs=config.pretrain_epochs, batch_size=config.batch_size, lr=config.lr,
                            weight_decay=config.weight_decay, device=device, progress=False)
    result = pretrain_position_encoding(model_cfg, path, train_cfg, size=config.pretrain_size, probe_folds=config.probe_folds)
    summary = {**result.to_dict(), "seconds": time.perf_counter() - start}
    write_json(path.with_suffix(".json"), summary)
    return summary


def _pretrained_line(label: str, summary: dict[str, Any]) -> str:
    before, after = summary["before"], summary["after"]
    return (f"pretrained {label}: probes left/right {before['left_right']:.2f} -> {after['left_right']:.2f}, "
            f"R² {before['distance_r2']:.2f} -> {after['distance_r2']:.2f} ({summary['seconds']:.0f} s)")


def _work(cell: Cell, family: Family, config: StudyConfig, device: str, init_pe: str | None, threads: int | None) -> dict[str, Any]:
    if threads:
        torch.set_num_threads(threads)
    return run_cell(cell, family, config, device=device, init_pe=init_pe)


def _describe(cell: Cell, result: dict[str, Any]) -> str:
    value = result["test"]
    shown = f"acc {100 * value:5.1f}%" if result["metric"] == "accuracy" else f"R² {value:6.3f}"
    return f"{cell}: {shown} ({result['seconds']:.0f} s)"


class _Schedule:
    """Cells ready to run, and cells that wait for their family's pretrained encoding."""

    def __init__(self, todo: list[Cell], families: dict[str, Family], folder: Path) -> None:
        self.init: dict[str, str] = {}
        self.to_pretrain: list[Family] = []
        waiting: dict[str, list[Cell]] = {}
        for label, family in families.items():
            if family.pretrained:
                path = _pretrained_path(folder, family)
                if path.is_file():
                    self.init[label] = str(path)
                elif any(c.family == label for c in todo):
                    self.to_pretrain.append(family)
                    waiting[label] = []
        self.ready = [c for c in todo if c.family not in waiting]
        for cell in todo:
            if cell.family in waiting:
                waiting[cell.family].append(cell)
        self._waiting = waiting

    def pretrained(self, family: Family, path: Path) -> None:
        """The encoding of ``family`` exists: its cells may run."""
        self.init[family.label] = str(path)
        self.ready += self._waiting.pop(family.label)


def run_study(
    config: StudyConfig,
    folder: str | Path,
    *,
    command: str = "vitpos study",
    workers: int = 1,
    device: str = "cpu",
    log: Callable[[str], None] = print,
) -> Path:
    """Run every unfinished cell of ``config`` into ``folder`` and write the report; returns its path.

    ``workers`` > 1 trains that many cells at once in separate processes with one thread each
    (pretraining included), which uses several CPU cores better than threads inside one small model.
    """
    folder = Path(folder)
    available, missing = split_available(config.families)
    for family in available:
        family.validate()
    for label, values in missing.items():
        log(f"skipping family {label}: {', '.join(values)} not available in this installation")
    if not available:
        raise ValueError("none of the study's families can run here: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in missing.items()))
    runnable = dataclasses.replace(config, families=tuple(available))
    _check_folder(folder, runnable)
    store = CellStore(folder / "cells")
    start = time.perf_counter()
    families = {f.label: f for f in runnable.families}
    cells = runnable.cells()
    results = {c: r for c in cells if (r := store.load(c)) is not None}
    todo = [c for c in cells if c not in results]
    schedule = _Schedule(todo, families, folder)
    log(f"{len(cells)} training runs: {len(results)} already done, {len(todo)} to go, {workers} at a time"
        + (f"; first pretraining {', '.join(f.label for f in schedule.to_pretrain)}" if schedule.to_pretrain else ""))
    seconds_per_cell: list[float] = []

    def finished(cell: Cell, result: dict[str, Any]) -> None:
        store.save(cell, result)
        results[cell] = result
        seconds_per_cell.append(result["seconds"])
        left = len(todo) - len(seconds_per_cell)
        eta = sum(seconds_per_cell) / len(seconds_per_cell) * left / max(workers, 1)
        log(f"[{len(results):4d}/{len(cells)}] {_describe(cell, result)}  ~{eta / 60:.1f} min left")

    try:
        if workers <= 1:
            for family in list(schedule.to_pretrain):
                path = _pretrained_path(folder, family)
                log(_pretrained_line(family.label, _pretrain(path, family, runnable, device)))
                schedule.pretrained(family, path)
            for cell in schedule.ready:
                finished(cell, run_cell(cell, families[cell.family], runnable, device=device, init_pe=schedule.init.get(cell.family)))
        else:
            _run_parallel(schedule, families, runnable, folder, device, workers, finished, log)
    finally:
        seconds = time.perf_counter() - start
        report = write_report(folder, runnable, results, missing=missing, seconds=seconds, command=command)
    log(f"wrote {report} ({len(results)}/{len(cells)} runs, {seconds / 60:.1f} min)")
    return report


def _run_parallel(schedule: _Schedule, families: dict[str, Family], config: StudyConfig, folder: Path, device: str,
                  workers: int, finished: Callable[[Cell, dict[str, Any]], None], log: Callable[[str], None]) -> None:
    """Keep ``workers`` processes busy: pretraining first, each family's cells once its encoding exists."""
    threads = max(1, (os.cpu_count() or 1) // workers)
    context = multiprocessing.get_context("spawn")  # fork after torch has started threads can deadlock
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: dict[Future, Cell | Family] = {}
        for family in schedule.to_pretrain:
            pending[pool.submit(_pretrain, _pretrained_path(folder, family), family, config, device, threads)] = family
        try:
            while schedule.ready or pending:
                while schedule.ready and len(pending) < workers:
                    cell = schedule.ready.pop(0)
                    init = schedule.init.get(cell.family)
                    pending[pool.submit(_work, cell, families[cell.family], config, device, init, threads)] = cell
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    job = pending.pop(future)
                    if isinstance(job, Family):
                        log(_pretrained_line(job.label, future.result()))
                        schedule.pretrained(job, _pretrained_path(folder, job))
                    else:
                        finished(job, future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise
