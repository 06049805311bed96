"""Which stage of a host a tool looks at: its index, its grid, and its name in tables and figures.

Every host is a pyramid of stages (the plain ViT has one); tools read a stage through the
:class:`~vitpos.models.host.Host` protocol only. Stage numbers count from 0; -1 is the last
stage, the one whose tokens the head reads.
"""

from __future__ import annotations

from torch import nn

from ..errors import ConfigError
from ..grid import Grid
from ..models.host import as_host
from ..models.layers import Block
from ..models.stage import Stage

__all__ = [
    "GridTooSmallError",
    "as_host",
    "stage_count",
    "stage_index",
    "stage_indices",
    "host_stage",
    "stage_blocks",
    "stage_grid",
    "native_grid",
    "stage_name",
]


class GridTooSmallError(ConfigError):
    """A stage's grid has too few cells for an analysis (``--stage all`` skips such a stage)."""


def stage_count(model: nn.Module) -> int:
    """Number of stages of the host (1 for the plain ViT)."""
    return len(as_host(model).stages)


def stage_index(model: nn.Module, stage: int = -1) -> int:
    """``stage`` as an index from 0 (negative counts from the last); raises if the host has no such stage."""
    count = stage_count(model)
    if not -count <= stage < count:
        raise ConfigError(
            f"stage {stage} does not exist: the model has {count} stage(s); use 0 to {count - 1} (or -1 for the last)"
        )
    return stage % count


def stage_indices(model: nn.Module, stage: int | None) -> list[int]:
    """Every stage for ``None``, else the one ``stage``."""
    return list(range(stage_count(model))) if stage is None else [stage_index(model, stage)]


def host_stage(model: nn.Module, stage: int = -1) -> Stage:
    """The :class:`~vitpos.models.stage.Stage` module of ``stage``: its position slots and blocks."""
    module = as_host(model).stages[stage_index(model, stage)]
    assert isinstance(module, Stage), "Host.stages holds one Stage per stage"
    return module


def stage_blocks(model: nn.Module, stage: int = -1) -> list[Block]:
    """The blocks of ``stage``, first to last."""
    modules = host_stage(model, stage).blocks
    blocks = [block for block in modules if isinstance(block, Block)]
    assert len(blocks) == len(modules), "a Stage's block factory builds Blocks"
    return blocks


def stage_grid(model: nn.Module, image_hw: tuple[int, int], stage: int = -1) -> Grid:
    """The token grid of ``stage`` for images of size ``image_hw``."""
    h, w = image_hw
    rows, cols = as_host(model).stage_grids((h, w))[stage_index(model, stage)]
    return rows, cols


def native_grid(model: nn.Module, stage: int = -1) -> Grid:
    """The grid of ``stage`` at the model's training size (the grid its tables were built for)."""
    return stage_grid(model, as_host(model).cfg.image_hw, stage)


def stage_name(model: nn.Module, stage: int, name: str) -> str:
    """``name`` as tables and figures show it: prefixed with its stage where the host has several."""
    return name if stage_count(model) == 1 else f"stage {stage_index(model, stage)} {name}"
