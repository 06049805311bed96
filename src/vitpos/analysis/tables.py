"""Read the position signal out of a model: a stage's absolute table and the PE each block receives.

These helpers only use the host's stages (``stages[s].position_encoding`` and the stage's
join's ``terms``), so they work on every host and for every join, including joins such as LaPE
that hand each block its own normalised copy of the PE.
Without a ``stage`` they read the last stage (the plain ViT's only one).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import VitposError, setting
from ..grid import Grid
from .stages import as_host, host_stage, native_grid, stage_index

__all__ = ["native_grid", "absolute_table", "layer_position_encodings", "NoPositionTableError", "TABLE_ENCODINGS"]

TABLE_ENCODINGS = ("learned", "sincos1d", "sincos2d", "learnable_sincos", "fourier")
"""Absolute encodings that give a table to analyse (examples for the error message)."""


class NoPositionTableError(VitposError):
    """The model has no absolute position table to analyse."""


def _sequence_pe(model: nn.Module, grid: Grid, stage: int) -> torch.Tensor:
    """The encoding of stage ``stage``'s whole sequence (1, P + H*W, D); raises if it has none."""
    pe = host_stage(model, stage).position_encoding(grid)
    if pe is None:
        absolute = as_host(model).cfg.position.absolute
        raise NoPositionTableError(
            f"this model has no absolute position table (absolute={absolute!r}); table analyses need an absolute "
            f"encoding: set the absolute slot ({setting('absolute', 'NAME')}) to one of {', '.join(TABLE_ENCODINGS)}"
        )
    return pe


@torch.no_grad()
def absolute_table(model: nn.Module, grid: Grid | None = None, stage: int = -1) -> torch.Tensor:
    """The absolute encoding of every cell of ``stage``, (H*W, D), row-major (prefix rows dropped).

    ``grid`` defaults to the stage's native grid.
    """
    s = stage_index(model, stage)
    h, w = grid or native_grid(model, s)
    return _sequence_pe(model, (h, w), s)[0, host_stage(model, s).num_prefix_tokens :].detach().float()


@torch.no_grad()
def layer_position_encodings(model: nn.Module, grid: Grid | None = None, stage: int = -1) -> dict[str, torch.Tensor]:
    """Every distinct position signal the blocks of ``stage`` receive, each (H*W, D), keyed by where it enters.

    ``"absolute"`` is the table itself; ``"block i"`` is the term the join adds at the stage's
    block ``i`` (to the normalised attention input, or to the residual stream) when it adds
    one. The ``input`` join only contributes ``"absolute"``; ``shared``/``unshared``/``lape``
    joins also give one entry per block. Raises :class:`NoPositionTableError` without an
    absolute encoding.
    """
    s = stage_index(model, stage)
    h, w = grid or native_grid(model, s)
    pe = _sequence_pe(model, (h, w), s)
    module = host_stage(model, s)
    prefix = module.num_prefix_tokens
    out = {"absolute": pe[0, prefix:].detach().float()}
    terms = module.join.additions(pe, (h, w))
    for index in range(len(module.blocks)):
        term = terms.attention_at(index)
        if term is None:
            term = terms.residual_at(index)
        if term is not None:
            out[f"block {index}"] = term.expand_as(pe)[0, prefix:].detach().float()
    return out
