"""What a study runs: the model, the tasks, the data sizes, the seeds — and the list of cells."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..config import HostConfig
from ..engine.member_course import Stopping
from ..models.factory import config_from_dict
from .cells import Cell
from .families import DEFAULT_FAMILIES, Family
from .hosts import study_model
from .sequential import Sequential

__all__ = ["TASKS", "EFFICIENCY_TASKS", "StudyConfig", "study_model"]

TASKS = ("direction", "distance", "absolute", "absolute_colorshift")
"""Thesis §4.1 (Table 1), §4.2 (Table 3) and §4.3 (Table 4)."""
EFFICIENCY_TASKS = ("direction", "distance")
"""The tasks of the learning curves (thesis Fig. 3)."""


@dataclass
class StudyConfig:
    """Every setting of a study; the default (5 seeds, up to 20 per undecided claim) takes 32 CPU-minutes."""

    families: tuple[Family, ...] = DEFAULT_FAMILIES
    seeds: int = 5
    """Seeds of the first round: every family trains every task on each."""
    rounds: int = 3
    """Looks of the sequential rule (:mod:`.sequential`): after the first round, a claim still undecided gets
    its runs on more seeds, the count doubled each round (5, 10, 20 seeds)."""
    train_size: int = 1000
    val_size: int = 100
    test_size: int = 400
    efficiency_sizes: tuple[int, ...] = (250,)
    """Extra training-set sizes for the learning curves; ``train_size`` is the last point. Every
    size gets the same number of optimiser steps, so the curves measure data, not training time."""
    efficiency_families: tuple[str, ...] | None = ("learned", "sincos2d", "fourier")
    """Families trained at the extra sizes: thesis Fig. 3 compares these three; None: every family."""
    resolutions: tuple[int, ...] = (16, 24, 32)
    """Image sizes the direction models are evaluated at (the training size is the model's)."""
    epochs: int = 20
    """The cap: epochs over ``train_size`` images (smaller training sets get proportionally more) and the
    length of the warm-up + cosine schedule; a run stops earlier by the patience rule."""
    extend: int = 2
    """A run that ends at the cap still improving trains again from its start with a cap this many times
    longer (every run alike, learning-rate trials included); 1: never."""
    patience: int = 4
    """Epochs without a better validation metric after which a run stops (it keeps its best epoch),
    from half the cap on (:attr:`min_epochs`): before, a run on an early plateau may still leave it."""
    batch_size: int = 32
    lr: float = 2e-3
    """Peak learning rate of the pretraining and of a family whose rate was not selected (AdamW,
    warm-up then cosine decay, as the engine trains)."""
    lr_grid: tuple[float, ...] = (2e-3, 5e-3)
    """Learning rates tried per family and task on the validation splits of ``rate_seeds``; () uses ``lr``."""
    rate_seeds: tuple[int, ...] = (1000, 1001)
    """The seeds of the learning-rate selection (no reported run uses them): a rate is chosen by its mean
    validation metric over them, so one seed's luck does not choose it."""
    weight_decay: float = 0.05
    pretrain_size: int = 1000
    """Images per pretraining task (direction4, then distance) for pretrained families."""
    pretrain_epochs: int = 20
    probe_folds: int = 5
    """Cross-validation folds of the table probes (the thesis uses 10)."""
    model: HostConfig = field(default_factory=study_model)

    def __post_init__(self) -> None:
        for name in (
            "seeds",
            "rounds",
            "train_size",
            "val_size",
            "test_size",
            "epochs",
            "extend",
            "patience",
            "batch_size",
            "pretrain_size",
            "pretrain_epochs",
            "probe_folds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if any(n < self.batch_size or n >= self.train_size for n in self.efficiency_sizes):
            raise ValueError(
                f"efficiency sizes must lie between batch_size={self.batch_size} and train_size={self.train_size}, "
                f"got {self.efficiency_sizes}; pass --efficiency-sizes with sizes in that range"
            )
        reported = self.round_seeds[-1]
        if not self.rate_seeds or min(self.rate_seeds) < reported:
            raise ValueError(
                f"rate_seeds {self.rate_seeds} must be given and lie above the reported seeds 0..{reported - 1}; "
                "pick larger ones"
            )
        if any(lr <= 0 for lr in self.lr_grid):
            raise ValueError(f"learning rates must be positive, got lr_grid={self.lr_grid}")
        if not self.families:
            raise ValueError("a study needs at least one family")
        labels = [f.label for f in self.families]
        if len(set(labels)) != len(labels):
            raise ValueError(f"family labels must be unique, got {labels}")
        for family in self.families:
            stride = family.host_config(self.model).stride
            bad = [r for r in self.resolutions if r % stride]
            if bad:
                whose = "the study model" if family.host is None else f"family {family.label}'s {family.host} host"
                raise ValueError(f"resolutions {bad} are not multiples of the stride of {whose} ({stride} pixels)")

    @classmethod
    def full(cls, **overrides: Any) -> StudyConfig:
        """The thesis protocol: 10 seeds, 5000/1000/1000 images at 32x32, learning curves from 500 images,
        at most 30 epochs."""
        settings = dict(
            seeds=10,
            train_size=5000,
            val_size=1000,
            test_size=1000,
            efficiency_sizes=(500, 1000, 2000),
            batch_size=64,
            resolutions=(24, 32, 48, 64),
            epochs=30,
            pretrain_size=5000,
            pretrain_epochs=30,
            probe_folds=10,
            efficiency_families=None,
            model=study_model(32),
        )
        return cls(**{**settings, **overrides})

    @property
    def round_seeds(self) -> tuple[int, ...]:
        """Seeds run by the end of each round: ``seeds`` doubled each round."""
        return tuple(self.seeds * 2**i for i in range(self.rounds))

    @property
    def sequential(self) -> Sequential:
        """The decision rule over the rounds."""
        return Sequential(self.round_seeds)

    @property
    def extends(self) -> bool:
        """Whether a run that ends at the cap still improving trains again (:attr:`extend` above 1)."""
        return self.extend > 1

    def extended(self) -> StudyConfig:
        """The same study with the cap :attr:`extend` times longer: how a run still improving at the cap trains
        again (from its start, on a schedule as long as the new cap)."""
        return dataclasses.replace(self, epochs=self.epochs * self.extend, extend=1)

    @property
    def min_epochs(self) -> int:
        """No run stops by patience before half the cap (a solved run stops at once)."""
        return self.epochs // 2

    def stopping(self, train_size: int) -> Stopping:
        """The stopping rule at ``train_size``: patience and the no-stop half of the cap in optimiser
        steps equal to the full training set's."""
        factor = self.epochs_for(train_size) / self.epochs
        return Stopping(patience=max(1, round(self.patience * factor)), min_epochs=round(self.min_epochs * factor))

    def epochs_for(self, train_size: int) -> int:
        """Epochs that give a training set of ``train_size`` images the steps of the full one."""
        return max(1, round(self.epochs * self.train_size / train_size))

    @property
    def tries_rates(self) -> bool:
        """Whether learning-rate trials train: a grid of two rates or more (one rate, or none, is no choice)."""
        return len(self.lr_grid) > 1

    @property
    def train_sizes(self) -> tuple[int, ...]:
        """Every training-set size of the learning curves, ascending."""
        return (*sorted(self.efficiency_sizes), self.train_size)

    def cells(self) -> list[Cell]:
        """Every training run of the first round, seed by seed, so a study cut short has whole seeds for every
        family (later rounds add the runs of undecided claims only: :meth:`RedGreenStudy.next_cells`)."""
        out = []
        for seed in range(self.seeds):
            for family in self.families:
                out += [Cell(family.label, task, self.train_size, seed) for task in TASKS]
                if self.curves(family.label):
                    out += [
                        Cell(family.label, task, n, seed)
                        for n in sorted(self.efficiency_sizes)
                        for task in EFFICIENCY_TASKS
                    ]
        return out

    def curves(self, label: str) -> bool:
        """Whether family ``label`` is trained at the learning curves' smaller sizes."""
        return self.efficiency_families is None or label in self.efficiency_families

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for JSON; equal dicts mean the same study."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["families"] = [f.to_dict() for f in self.families]
        out["model"] = self.model.to_dict()
        out["efficiency_sizes"] = list(self.efficiency_sizes)
        out["resolutions"] = list(self.resolutions)
        out["lr_grid"] = list(self.lr_grid)
        out["rate_seeds"] = list(self.rate_seeds)
        out["efficiency_families"] = None if self.efficiency_families is None else list(self.efficiency_families)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StudyConfig:
        """Inverse of :meth:`to_dict` (e.g. the ``config`` of a ``results.json``)."""
        data = dict(data)
        data["families"] = tuple(Family(**f) for f in data["families"])
        data["model"] = config_from_dict(data["model"])
        for name in ("efficiency_sizes", "resolutions", "lr_grid", "rate_seeds"):
            data[name] = tuple(data[name])
        if data.get("efficiency_families") is not None:
            data["efficiency_families"] = tuple(data["efficiency_families"])
        return cls(**data)
