"""An analysis over the stages a command was asked for: a progress bar over them, and under
``--stage all`` a stage whose grid is too small for the analysis skipped with a line saying so."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torch import nn

from ..analysis.stages import GridTooSmallError, stage_indices
from ..errors import ConfigError
from ..progress import progress

__all__ = ["each_stage"]

T = TypeVar("T")


def each_stage(model: nn.Module, stage: int | None, what: str, analyse: Callable[[int], T]) -> dict[int, T]:
    """``{stage: analyse(stage)}`` for ``stage`` (None: every stage, skipping those too small for ``what``)."""
    done: dict[int, T] = {}
    for index in progress(stage_indices(model, stage), what, unit="stage"):
        try:
            done[index] = analyse(index)
        except GridTooSmallError as err:
            if stage is not None:  # the one stage asked for: nothing else to write
                raise
            print(f"stage {index}: skipped ({err})")
    if not done:
        raise ConfigError(f"no stage of this model has a grid large enough for {what}; nothing was written")
    return done
