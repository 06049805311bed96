"""Read the position signal out of a model: the absolute table and the PE each layer receives.

These helpers only use the host's slot interfaces (``position_encoding`` and the join's
``terms``), so they work for every join — including
joins such as LaPE that hand each layer its own normalised copy of the PE.
"""

from __future__ import annotations

import torch
from torch import nn

from ..grid import Grid
from ..errors import VitposError

__all__ = ["native_grid", "absolute_table", "layer_position_encodings", "NoPositionTableError"]


class NoPositionTableError(VitposError):
    """The model has no absolute position table to analyse."""


def native_grid(model: nn.Module) -> Grid:
    """The grid the model was built for (its training resolution)."""
    return tuple(model.cfg.grid)


def _sequence_pe(model: nn.Module, grid: Grid) -> torch.Tensor:
    """The encoding of the whole sequence (1, P + H*W, D); raises if the model has none."""
    pe = model.position_encoding(grid) if hasattr(model, "position_encoding") else None
    if pe is None:
        raise NoPositionTableError(
            f"this model has no absolute position table (absolute={model.cfg.position.absolute!r}); "
            "table analyses need learned, sincos1d, sincos2d, learnable_sincos or fourier"
        )
    return pe


@torch.no_grad()
def absolute_table(model: nn.Module, grid: Grid | None = None) -> torch.Tensor:
    """The absolute encoding of every grid cell, (H*W, D), in row-major order (prefix rows dropped)."""
    grid = tuple(grid or native_grid(model))
    return _sequence_pe(model, grid)[0, model.num_prefix_tokens :].detach().float()


@torch.no_grad()
def layer_position_encodings(model: nn.Module, grid: Grid | None = None) -> dict[str, torch.Tensor]:
    """Every distinct position signal the blocks receive, each (H*W, D), keyed by where it enters.

    ``"absolute"`` is the table itself; ``"block i"`` is the term the join adds at block ``i``
    (to the normalised attention input, or to the residual stream) when it adds one. The
    ``input`` join only contributes ``"absolute"``; ``shared``/``unshared``/``lape`` joins also
    give one entry per block. Raises :class:`NoPositionTableError` without an absolute encoding.
    """
    grid = tuple(grid or native_grid(model))
    pe = _sequence_pe(model, grid)
    prefix = model.num_prefix_tokens
    out = {"absolute": pe[0, prefix:].detach().float()}
    terms = model.join.terms(pe, grid)
    for index in range(len(model.blocks)):
        term = terms.attention_at(index)
        if term is None:
            term = terms.residual_at(index)
        if term is not None:
            out[f"block {index}"] = term.expand_as(pe)[0, prefix:].detach().float()
    return out
