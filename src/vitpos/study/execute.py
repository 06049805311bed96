"""Run cells of a study: train to convergence within a cap (one model, or the seeds and tasks of one size as
a stacked ensemble), then measure what the encoding learned."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..analysis.probes import probe_table
from ..analysis.similarity import default_references, similarity_maps
from ..analysis.stages import native_grid
from ..analysis.tables import absolute_table
from ..config import HostConfig
from ..data.dataset import DataSplits, ImageDataset, Size, as_size
from ..data.synthetic import SyntheticTask
from ..engine.config import TrainConfig
from ..engine.ensemble import Member, Stopping, initial_model, train_ensemble
from ..engine.stack_evaluate import evaluate_models
from ..engine.train import TrainResult
from ..grid import Grid
from ..tasks import primary_metric
from .cells import UNTRAINED, Cell
from .convergence import run_record
from .families import Family
from .protocol import StudyConfig

__all__ = [
    "PROBE_TASKS", "SIMILARITY_TASK", "TRAINS_AS", "train_config", "training_key", "half_contrast", "run_cells",
    "run_trials",
]  # fmt: skip

PROBE_TASKS = ("direction", "distance")
"""Thesis Table 2 probes the tables trained on these tasks."""
SIMILARITY_TASK = "absolute_colorshift"
"""Thesis Fig. 5 shows the tables trained on this task."""
TRAINS_AS = {"absolute_colorshift": "absolute"}
"""Tasks whose training and validation splits are another task's: only the test colours differ,
so one trained model answers both (same seed, same images, same steps)."""


def train_config(
    config: StudyConfig,
    cell: Cell,
    *,
    device: str,
    init_pe: str | None = None,
    lr: float | None = None,
    compile: bool = False,
) -> TrainConfig:
    """The engine settings of a cell: the same cap of optimiser steps and warm-up at every training-set
    size; ``lr`` the family's rate for the task (default: the study's); ``compile`` the stacked step's."""
    epochs = config.epochs_for(cell.train_size)
    return TrainConfig(
        data=f"synthetic:{cell.task}",
        epochs=epochs,
        batch_size=config.batch_size,
        lr=config.lr if lr is None else lr,
        weight_decay=config.weight_decay,
        warmup_epochs=epochs / 10,
        seed=cell.seed,
        init_pe=init_pe,
        device=device,
        eval_every=epochs,
        progress=False,
        compile=compile,
    )


def _score(metrics: dict[str, float], task: str) -> float:
    """The primary metric as a fraction (accuracy) or R²."""
    key = primary_metric(task)
    return metrics[key] / 100.0 if key == "acc1" else metrics[key]


def half_contrast(table: torch.Tensor, grid: Grid) -> float:
    """Mean cosine similarity of cells in the same half (upper/lower) minus that of cells in opposite
    halves: about 0 for a random table, positive for one that has learned the split (thesis Fig. 5)."""
    h, w = grid
    unit = F.normalize(table.double(), dim=-1)
    sim = unit @ unit.t()
    lower = (torch.arange(h * w) // w) >= h / 2
    same = lower[:, None] == lower[None, :]
    off_diagonal = ~torch.eye(h * w, dtype=torch.bool)
    return float(sim[same & off_diagonal].mean() - sim[~same].mean())


@dataclass
class _Prepared:
    """A cell's data and configs, and what to measure after training."""

    cell: Cell
    data: DataSplits
    model_cfg: HostConfig
    train_cfg: TrainConfig
    probes: bool
    similarity: bool
    contrast: bool
    resolutions: bool
    initial: nn.Module
    """The model training starts from (built once: the extension's second start and the probes' "before"
    table read it too)."""


def _synthetic(cell: Cell, config: StudyConfig, train: int) -> SyntheticTask:
    """The red-green task of ``cell`` with ``train`` training images."""
    return SyntheticTask(
        cell.task,
        img_size=config.model.image_hw,
        square_size=config.model.patch_size,
        train=train,
        val=config.val_size,
        test=config.test_size,
        seed=cell.seed,
    )


class _InitialModels:
    """The models runs start from, each built once per (model config, seed, initial encoding): a task's
    training-set sizes, a twin (:data:`TRAINS_AS`) and tasks of one output width start from one model,
    which they only read (the stacks gather its weights; the probes read its table)."""

    def __init__(self) -> None:
        self._built: dict[tuple[str, int, str | None], nn.Module] = {}

    def __call__(self, model_cfg: HostConfig, seed: int, init_pe: str | None) -> nn.Module:
        key = (repr(model_cfg), seed, init_pe)  # a config's repr names every field
        if key not in self._built:
            self._built[key] = initial_model(model_cfg, seed, init_pe).eval()
        return self._built[key]


def _untrained(
    cell: Cell, family: Family, config: StudyConfig, init_pe: str | None, initials: _InitialModels
) -> dict[str, Any]:
    """An untrained cell (:data:`~.cells.UNTRAINED`): the probes of the table its task's runs start from, as a
    trained cell of that seed reads them ``before`` training (the same model, seed and probe)."""
    info = _synthetic(cell, config, config.train_size).info
    model = initials(family.model_config(config.model, num_classes=info.num_outputs), cell.seed, init_pe)
    return {"probes": {"before": _table_probes(absolute_table(model), native_grid(model), config, cell.seed)}}


def _table_probes(table: torch.Tensor, grid: Grid, config: StudyConfig, seed: int) -> dict[str, Any]:
    """The study's probes of one position table (thesis Table 2), as every cell computes them."""
    return probe_table(table, grid, folds=config.probe_folds, seed=seed).to_dict()


def _prepare(
    cell: Cell,
    family: Family,
    config: StudyConfig,
    device: str,
    init_pe: str | None,
    lr: float | None,
    extras: bool,
    initials: _InitialModels,
    compile: bool = False,
) -> _Prepared:
    model_base = config.model
    task = _synthetic(cell, config, cell.train_size)
    data = task.splits()
    model_cfg = family.model_config(model_base, num_classes=data.info.num_outputs)
    full = extras and cell.train_size == config.train_size
    probes = family.has_table and full and cell.task in PROBE_TASKS
    contrast = family.has_table and full and cell.task == SIMILARITY_TASK
    similarity = contrast and cell.seed == 0
    return _Prepared(
        cell,
        data,
        model_cfg,
        train_config(config, cell, device=device, init_pe=init_pe, lr=lr, compile=compile),
        probes,
        similarity,
        contrast,
        full and cell.task == "direction" and bool(config.resolutions),
        initials(model_cfg, cell.seed, init_pe),
    )


def _kept_val(history: list[dict[str, Any]]) -> dict[str, float]:
    """The validation metrics of the epoch whose weights a run kept (its best), as its training measured them."""
    kept = history[-1].get("best_epoch", history[-1]["epoch"])
    row = next(row for row in history if row["epoch"] == kept)
    return {key.removeprefix("val_"): value for key, value in row.items() if key.startswith("val_")}


def _test_evaluations(
    jobs: list[_Prepared], results: dict[Cell, TrainResult], config: StudyConfig
) -> dict[tuple[Cell, Size], dict[str, float]]:
    """The test metrics (cell, image size) that :func:`_measure` needs beyond training's own, on the CPU: a twin's
    test split (:data:`TRAINS_AS`), and the resolution sweeps (the test split at each of ``config.resolutions``,
    drawn anew). The models of one image size are evaluated in one stacked pass (:func:`evaluate_models`)."""
    wanted: dict[tuple[Cell, Size], tuple[nn.Module, ImageDataset]] = {}
    for job in jobs:
        model, test = results[job.cell].model.cpu(), job.data.test
        if not results[job.cell].test:
            wanted[(job.cell, as_size(config.model.image_hw))] = model, test
        if job.resolutions:
            wanted |= {(job.cell, as_size(size)): (model, test.at_size(size)) for size in config.resolutions}
    out: dict[tuple[Cell, Size], dict[str, float]] = {}
    for size in dict.fromkeys(hw for _, hw in wanted):
        keys = [key for key in wanted if key[1] == size]
        models, splits = zip(*(wanted[key] for key in keys), strict=True)
        out |= zip(keys, evaluate_models(models, splits, batch_size=256, device=torch.device("cpu")), strict=True)
    return out


def _measure(
    job: _Prepared, result: TrainResult, config: StudyConfig, tests: dict[tuple[Cell, Size], dict[str, float]]
) -> dict[str, Any]:
    """Test and val metric (the kept epoch's, as training measured it), and where they apply probes, resolution
    sweep, half contrast and similarity maps; ``tests`` holds the test metrics training did not give
    (:func:`_test_evaluations`)."""
    cell, data = job.cell, job.data
    model = result.model.cpu()
    grid = native_grid(model)  # the last stage's: the probes and maps read its table
    kind = data.info.task
    test = result.test or tests[(cell, as_size(config.model.image_hw))]
    out: dict[str, Any] = {
        "metric": "accuracy" if kind == "classification" else "r2",
        "test": _score(test, kind),
        "val": _score(_kept_val(result.history), kind),
        "lr": job.train_cfg.lr,
        **run_record(result.history, primary_metric(kind), data.info.num_outputs),
    }
    # the tables before and after training, where probes or the half contrast (and its similarity maps) read them
    tables = (
        {"before": absolute_table(job.initial), "after": absolute_table(model)} if job.probes or job.contrast else {}
    )
    if job.probes:
        out["probes"] = {stage: _table_probes(table, grid, config, cell.seed) for stage, table in tables.items()}
    if job.resolutions:
        sizes = map(as_size, config.resolutions)
        out["resolution"] = {str(hw[0]): _score(tests[(cell, hw)], kind) for hw in sizes}
    if job.contrast:
        out["half_contrast"] = {stage: half_contrast(table, grid) for stage, table in tables.items()}
    if job.similarity:
        refs = default_references(grid)
        out["similarity"] = {
            "references": [list(r) for r in refs],
            **{stage: similarity_maps(table, grid, refs).tolist() for stage, table in tables.items()},
        }
    return out


def training_key(cell: Cell) -> tuple[str, str, int, int]:
    """What makes a cell's training: cells with one key share one trained model (:data:`TRAINS_AS`)."""
    return cell.family, TRAINS_AS.get(cell.task, cell.task), cell.train_size, cell.seed


def _train(units: list[_Prepared], config: StudyConfig, ensemble: bool) -> list[TrainResult]:
    """Train ``units`` by the study's stopping rule: with ``ensemble`` the units of one model shape as one stacked
    ensemble (its members may differ in seed, task, learning rate and training-set size), else one by one.

    A unit still improving at the cap trains again from its start under the :meth:`~StudyConfig.extended`
    cap (every run alike, trials included); its history says so. Stacked, each unit's longer run trains
    alongside it from the first step (:attr:`~vitpos.engine.ensemble.Member.fallback_for`) and stops as
    soon as the unit stops before its cap: a stack's steps are launched once for both, not once more for
    the runs at their caps. One by one, only the units at their caps train again."""
    rules = [config.stopping(u.cell.train_size) for u in units]
    if not config.extends:
        return _train_groups(units, rules, ensemble)
    longer = config.extended()
    again = [_extended(u, longer) for u in units]
    again_rules = [longer.stopping(u.cell.train_size) for u in units]
    if ensemble:
        both = _train_groups(units + again, rules + again_rules, True, fallback_for=list(range(len(units))))
        trained, retrained = both[: len(units)], dict(enumerate(both[len(units) :]))
    else:
        trained = _train_groups(units, rules, False)
        capped = [i for i, result in enumerate(trained) if _capped(result)]
        longer_runs = _train_groups([again[i] for i in capped], [again_rules[i] for i in capped], False)
        retrained = dict(zip(capped, longer_runs, strict=True))
    for i, result in enumerate(trained):
        if _capped(result):
            trained[i] = retrained[i]
            trained[i].history[-1]["extended_from"] = result.history[-1]["step"]
    return trained


def _capped(result: TrainResult) -> bool:
    """Whether ``result``'s run ended at its cap."""
    return result.history[-1].get("stop", "cap") == "cap"


def _extended(unit: _Prepared, longer: StudyConfig) -> _Prepared:
    """``unit`` with the longer cap's epochs, warm-up and evaluation (same seed, rate and data)."""
    epochs = longer.epochs_for(unit.cell.train_size)
    cfg = dataclasses.replace(unit.train_cfg, epochs=epochs, warmup_epochs=epochs / 10, eval_every=epochs)
    return dataclasses.replace(unit, train_cfg=cfg)


def _train_groups(
    units: list[_Prepared], rules: list[Stopping], ensemble: bool, fallback_for: list[int] | None = None
) -> list[TrainResult]:
    """One pass of :func:`_train`, each unit by its stopping rule ``rules[i]``: with ``ensemble`` the units of
    one model shape as one stack, each on its own course (training-set size, cap and stopping rule), else one
    by one. ``fallback_for`` (stacked): unit ``len(fallback_for) + i`` stands in for unit ``fallback_for[i]``
    (both are of one model shape, so of one stack)."""
    stands_in = {len(fallback_for or ()) + i: j for i, j in enumerate(fallback_for or ())}
    groups: list[list[int]] = []
    for i, unit in enumerate(units):
        group = next((g for g in groups if units[g[0]].model_cfg == unit.model_cfg), None)
        if ensemble and group is not None:
            group.append(i)
        else:
            groups.append([i])
    trained: dict[int, TrainResult] = {}
    for group in groups:
        local = {i: n for n, i in enumerate(group)}
        members = [
            Member(units[i].train_cfg, units[i].data, units[i].initial,
                   fallback_for=local[stands_in[i]] if i in stands_in else None)
            for i in group
        ]  # fmt: skip
        results = train_ensemble(units[group[0]].model_cfg, members, [rules[i] for i in group])
        trained |= dict(zip(group, results, strict=True))
    return [trained[i] for i in range(len(units))]


def _shared_times(out: dict[Any, dict[str, Any]], start: float, cpu_start: float) -> dict[Any, dict[str, Any]]:
    """``out`` with the call's wall and CPU seconds shared equally among its entries."""
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {key: result | {"seconds": seconds / len(out), "cpu_seconds": cpu / len(out)} for key, result in out.items()}


def run_cells(
    cells: list[Cell],
    family: Family,
    config: StudyConfig,
    *,
    device: str = "cpu",
    init_pe: str | Path | None = None,
    rates: dict[str, float] | None = None,
    ensemble: bool = False,
    extras: bool = True,
    compile: bool = False,
) -> dict[Cell, dict[str, Any]]:
    """Train and measure ``cells`` of one family; returns each cell's results.

    Each training stops by the study's patience rule within its cap (:class:`~vitpos.engine.ensemble.Stopping`);
    ``rates`` maps a training task to its learning rate (default: the study's). Cells that train
    alike (:data:`TRAINS_AS`) share one trained model. With ``ensemble`` the distinct trainings
    (seeds, tasks and training-set sizes, each at its task's rate) run as one stacked ensemble, which
    ends exactly where training them one by one would (``vitpos.engine.ensemble``); every size gets
    the same cap of optimiser steps, so the sizes share the stack's steps. ``extras``
    off skips the probes, maps and resolution sweep (learning-rate selection needs the val metric
    alone). ``compile`` compiles each stack's training step (:mod:`vitpos.engine.stacked_step`; opt-in).
    An untrained cell (:data:`~.cells.UNTRAINED`) trains nothing: its initial table's probes alone.
    ``seconds`` and ``cpu_seconds`` are the call's times shared equally among its cells.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    init = str(init_pe) if init_pe else None
    rates, initials = rates or {}, _InitialModels()
    out = {c: _untrained(c, family, config, init, initials) for c in cells if c.train_size == UNTRAINED}
    jobs = [
        _prepare(c, family, config, device, init, rates.get(TRAINS_AS.get(c.task, c.task)), extras, initials, compile)
        for c in cells
        if c.train_size != UNTRAINED
    ]
    trainings: dict[tuple[str, str, int, int], _Prepared] = {}
    for job in sorted(jobs, key=lambda j: j.cell.task != TRAINS_AS.get(j.cell.task, j.cell.task)):
        trainings.setdefault(training_key(job.cell), job)
    trained = _train(list(trainings.values()), config, ensemble)
    by_key = dict(zip(trainings, trained, strict=True))
    results = {
        job.cell: by_key[training_key(job.cell)]
        if trainings[training_key(job.cell)] is job
        else dataclasses.replace(by_key[training_key(job.cell)], test={})  # a twin: same model, its own test split
        for job in jobs
    }
    tests = _test_evaluations(jobs, results, config)
    for job in jobs:
        out[job.cell] = _measure(job, results[job.cell], config, tests)
    return _shared_times(out, start, cpu_start)


def run_trials(
    trials: list[tuple[Cell, float]],
    family: Family,
    config: StudyConfig,
    *,
    device: str = "cpu",
    init_pe: str | Path | None = None,
    ensemble: bool = False,
    compile: bool = False,
) -> dict[tuple[Cell, float], dict[str, Any]]:
    """Learning-rate trials: each (cell, rate) trained at that rate and measured on its validation split
    (no extras); with ``ensemble`` all of them as one stacked ensemble, each member at its own rate."""
    start, cpu_start = time.perf_counter(), time.process_time()
    init = str(init_pe) if init_pe else None
    initials = _InitialModels()
    units = [_prepare(cell, family, config, device, init, lr, False, initials, compile) for cell, lr in trials]
    trained = _train(units, config, ensemble)
    out = {(u.cell, u.train_cfg.lr): _measure(u, r, config, {}) for u, r in zip(units, trained, strict=True)}
    return _shared_times(out, start, cpu_start)
