"""What the cell loop (:func:`~.run.run_study`) asks of a study: a :class:`StudyPlan`.

The loop itself is task-blind: it checks the folder's settings, skips finished cells, schedules
jobs (pretraining first, stacked ensembles where they apply) on a process pool, logs progress and
writes the report. A plan says which families and cells there are, how a job of cells trains and
measures (with the engine, which finds the task's loss and metrics by the data's task), what a
finished cell reads like in the log, and how the report is written. The red-green study
(:class:`~.protocol.StudyConfig`) and the dense-prediction studies (:class:`~.dense.DenseStudy`:
detection, :mod:`.detect`, and segmentation, :mod:`.segment`) are plans.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config import HostConfig
from .cells import Cell
from .families import Family

__all__ = ["StudyPlan", "Results", "RateChoice", "JobOptions"]

Results = dict[Cell, dict[str, Any]]
"""Each finished cell's measurements."""
RateChoice = tuple[dict[str, dict[str, float]], float | None]
"""The learning rates (family label -> training task -> rate) and the trials' wall seconds per job."""


@dataclass(frozen=True)
class JobOptions:
    """How one job (cells of one family) trains."""

    device: str
    init_pe: str | None = None
    """The family's pretrained encoding (a file), where it has one."""
    ensemble: bool = False
    """Train the seeds, tasks and training-set sizes of one family as one stacked ensemble."""
    rates: dict[str, float] = field(default_factory=dict)
    """Training task -> learning rate (a task not named: the study's)."""
    extras: bool = True
    """The measurements beyond the test and validation metric (off: learning-rate trials)."""
    threads: int | None = None
    """Intra-op threads of the worker process that runs the job (None: leave them)."""
    compile: bool = False
    """Compile each stacked ensemble's training step (:mod:`vitpos.engine.stacked_step`; opt-in)."""


class StudyPlan(Protocol):
    """A study as the cell loop runs it."""

    @property
    def runs(self) -> str:
        """What the log calls its cells' runs (``training``, ``detection``)."""
        ...

    @property
    def families(self) -> tuple[Family, ...]:
        """The arms of the comparison."""
        ...

    @property
    def model(self) -> HostConfig:
        """The model every family changes."""
        ...

    def with_families(self, families: tuple[Family, ...]) -> StudyPlan:
        """The same study over ``families`` only."""
        ...

    def cells(self) -> list[Cell]:
        """Every training run, seed by seed."""
        ...

    def next_cells(self, results: Results) -> list[Cell]:
        """The runs of the next round of seeds, given the finished ones (none: the study is done)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with ``seeds`` and ``families`` (one dict with a ``label`` each); equal dicts, same study."""
        ...

    def choose_rates(
        self,
        folder: Path,
        device: str,
        workers: int,
        log: Callable[[str], None],
        stacked: frozenset[str] = frozenset(),
        compile: bool = False,
    ) -> RateChoice:
        """Family label -> training task -> learning rate, chosen (and recorded in ``folder``) before the cells
        run (the families in ``stacked`` with their trials as one stacked ensemble, its step compiled with
        ``compile``); and the wall seconds per job that the trials took here (None: no trial ran)."""
        ...

    def pretrain(self, path: Path, family: Family, rates: dict[str, float], device: str, threads: int | None) -> str:
        """Make the pretrained encoding of a family that asks for one at ``path``; returns its log line."""
        ...

    def run_cells(self, cells: list[Cell], family: Family, job: JobOptions) -> Results:
        """Train and measure ``cells`` of one family as ``job`` says."""
        ...

    def describe(self, cell: Cell, result: dict[str, Any]) -> str:
        """A finished cell as the log shows it."""
        ...

    def write_report(
        self, folder: Path, results: Results, *, missing: dict[str, list[str]], wall_seconds: list[float], command: str
    ) -> Path:
        """Write ``report.md`` and ``results.json`` into ``folder``; returns the report."""
        ...
