"""The join slot: where and how the absolute signal enters the blocks."""

from __future__ import annotations

import torch
from torch import nn

from ..grid import Grid
from ..registry import JOIN
from .base import SlotContext, SlotEntry
from .relative.base import RelativePosition

__all__ = ["Join", "InputJoin"]


class Join(SlotEntry, nn.Module):
    """Base class. ``pe`` is the absolute encoding of the whole sequence, (1, P + H*W, D), or None.

    The host calls :meth:`enter` once before block 0, then for every block ``i``
    :meth:`before_block` on the residual stream and :meth:`attention_pos`, whose result is
    added to the block's normalised attention input. At construction the host passes each
    block's relative encoding through :meth:`adapt_relative`.
    """

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__()
        self.depth = ctx.depth

    def enter(self, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        """Tokens entering block 0."""
        return x

    def before_block(self, index: int, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        """The residual stream entering block ``index``."""
        return x

    def attention_pos(self, index: int, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor | None:
        """A term added to block ``index``'s normalised attention input, or None."""
        return None

    def adapt_relative(self, index: int, relative: RelativePosition | None) -> RelativePosition | None:
        """The relative encoding block ``index`` should use (e.g. wrapped); unchanged by default."""
        return relative


@JOIN.register("input")
class InputJoin(Join):
    """ViT/DeiT: add the encoding to the tokens once, before the first block."""

    def enter(self, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        return x if pe is None else x + pe
