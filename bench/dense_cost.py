"""The dense studies' training wall time on a device, projected from two short runs of their own cells.

A cell of ``--task detect`` or ``--task segment`` (:class:`vitpos.study.dense.DenseStudy`) is trained
twice on the device, on ``short`` and on ``long`` batches of training images (one epoch, the study's
model, batch and data otherwise, evaluation on one batch); the difference of the two wall times over
the difference of their steps is the seconds per optimiser step, free of start-up and evaluation.
The projection multiplies it by the default protocol's steps (every family, seed and epoch), one run
after another; evaluation and start-up aside.
"""

from __future__ import annotations

import dataclasses

from vitpos.engine.distributed import Dist, steps_per_epoch
from vitpos.study.cells import Cell
from vitpos.study.dense import DenseStudy
from vitpos.study.detect import DetectStudyConfig
from vitpos.study.plan import JobOptions
from vitpos.study.segment import SegmentStudyConfig

__all__ = ["DENSE", "step_seconds", "protocol_steps", "projection_row"]

DENSE: dict[str, type[DenseStudy]] = {"detect": DetectStudyConfig, "segment": SegmentStudyConfig}


def _cell_seconds(study: DenseStudy, batches: int, device: str) -> float:
    short = dataclasses.replace(
        study, train_size=batches * study.batch_size, val_size=study.batch_size, test_size=study.batch_size, epochs=1
    )
    family = short.families[0]
    cell = Cell(family.label, short.TASK, short.train_size, 0)
    return short.run_cells([cell], family, JobOptions(device))[cell]["seconds"]


def step_seconds(study: DenseStudy, device: str, short: int = 2, long: int = 6) -> float:
    """Seconds per optimiser step of ``study``'s first family on ``device``, from runs of ``short`` and ``long``
    batches (one warm-up run first, so that neither pays the first call's costs)."""
    _cell_seconds(study, 1, device)
    return max(_cell_seconds(study, long, device) - _cell_seconds(study, short, device), 0.0) / (long - short)


def protocol_steps(study: DenseStudy) -> int:
    """Optimiser steps of every cell of ``study``."""
    return len(study.cells()) * study.epochs * steps_per_epoch(study.train_size, study.batch_size, Dist())


def projection_row(task: str, device: str, batch: int | None = None) -> dict:
    """The default ``--task`` study's projected training wall time, one run after another, from its step
    measured at ``batch`` (None: the study's; a smaller one only for a smoke test)."""
    study = DENSE[task]()
    measured = dataclasses.replace(study, batch_size=min(batch, study.batch_size)) if batch else study
    seconds = step_seconds(measured, device)
    steps = protocol_steps(study)
    return {
        "task": task,
        "family": study.families[0].label,
        "measured_batch": measured.batch_size,
        "step_ms": 1000 * seconds,
        "steps": steps,
        "projected_min": seconds * steps / 60,
        "how": "one run after another, evaluation and start-up aside",
    }
