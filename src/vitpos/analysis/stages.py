"""Which stage of a host a tool looks at: its index, its grid, and its name in tables and figures.

Every host is a pyramid of stages (the plain ViT has one); tools read a stage through the
:class:`~vitpos.models.host.Host` protocol only. Stage numbers count from 0; -1 is the last
stage, the one whose tokens the head reads.
"""

from __future__ import annotations

from torch import nn

from ..errors import ConfigError
from ..grid import Grid

__all__ = ["stage_index", "stage_indices", "stage_grid", "native_grid", "stage_name"]


def stage_index(model: nn.Module, stage: int = -1) -> int:
    """``stage`` as an index from 0 (negative counts from the last); raises if the host has no such stage."""
    count = len(model.stages)
    if not -count <= stage < count:
        raise ConfigError(
            f"stage {stage} does not exist: the model has {count} stage(s); use 0 to {count - 1} (or -1 for the last)"
        )
    return stage % count


def stage_indices(model: nn.Module, stage: int | None) -> list[int]:
    """Every stage for ``None``, else the one ``stage``."""
    return list(range(len(model.stages))) if stage is None else [stage_index(model, stage)]


def stage_grid(model: nn.Module, image_hw: tuple[int, int], stage: int = -1) -> Grid:
    """The token grid of ``stage`` for images of size ``image_hw``."""
    return tuple(model.stage_grids(tuple(image_hw))[stage_index(model, stage)])


def native_grid(model: nn.Module, stage: int = -1) -> Grid:
    """The grid of ``stage`` at the model's training size (the grid its tables were built for)."""
    return stage_grid(model, model.cfg.image_hw, stage)


def stage_name(model: nn.Module, stage: int, name: str) -> str:
    """``name`` as tables and figures show it: prefixed with its stage where the host has several."""
    return name if len(model.stages) == 1 else f"stage {stage_index(model, stage)} {name}"
