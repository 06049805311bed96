"""One stage of a host: the four position slots at the stage's size, and its blocks."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..config import PositionConfig, SlotContext
from ..encodings.join import padded_additions
from ..encodings.relative.base import RelativePosition
from ..grid import Grid
from ..padding import Padding
from .layers import Block

__all__ = ["Stage"]

BlockFactory = Callable[[int, "RelativePosition | None"], Block]
"""Builds block ``index`` of a stage around the relative encoding it is given."""


class Stage(nn.Module):
    """The slots and blocks of one stage (the plain ViT has one stage, PVT and Swin four).

    ``ctx`` describes the stage (its width, heads, depth, native grid and prefix tokens): the
    absolute encoding, join and conditional generators are built from it, and conditional
    positions count the stage's blocks (``peg@0`` = after the first block of the stage).
    ``relative_ctx`` is what each block's relative encoding is built from: the stage itself
    under global attention, one window under window attention. Every module is built from the
    slots as ``position`` resolved them (:meth:`~vitpos.config.PositionConfig.slot`).
    """

    def __init__(
        self,
        index: int,
        position: PositionConfig,
        ctx: SlotContext,
        relative_ctx: SlotContext,
        make_block: BlockFactory,
        drop_rate: float = 0.0,
    ) -> None:
        super().__init__()
        self.index = index
        self.num_prefix_tokens = ctx.num_prefix_tokens
        try:
            self.absolute = position.slot("absolute").build(ctx)
            self.join = position.slot("join").build(ctx, has_absolute=self.absolute is not None)
            self.conditional = position.slot("conditional").build(ctx)
            relative = position.slot("relative")
            self.blocks = nn.ModuleList(
                make_block(i, self.join.adapt_relative(i, relative.build(relative_ctx, layer=i)))
                for i in range(ctx.depth)
            )
        except ValueError as err:
            raise ValueError(f"stage {index} (width {ctx.embed_dim}, depth {ctx.depth}): {err}") from None
        self.pos_drop = nn.Dropout(drop_rate)

    def position_encoding(self, grid: Grid, padding: Padding | None = None) -> torch.Tensor | None:
        """The stage's absolute encoding of its whole sequence at ``grid`` (1, P + H*W, D), or None;
        with ``padding``, each image's at its own valid grid (B, P + H*W, D), zero on padded cells."""
        if self.absolute is None:
            return None
        if padding is None:
            return self.absolute.with_prefix(grid)
        return padding.place(self.absolute.with_prefix, self.num_prefix_tokens)

    def forward(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        padding: Padding | None = None,
        taps: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:  # B, P + H*W, C
        """Run the blocks with the slots: the join's additions (computed once from the absolute
        encoding and ``grid``) and the conditional generators at their positions (-1 = before
        block 0, i = after block i). ``padding`` (of ``grid``) marks a padded batch: every slot
        then treats each image as if it ran alone on its valid cells (:mod:`vitpos.padding`).
        Every block's output is appended to ``taps`` if given."""
        if padding is None:
            additions = self.join.additions(self.position_encoding(grid), grid)
        else:
            additions = padded_additions(self.join, self.position_encoding, padding, num_prefix_tokens)
        extra = {} if padding is None else {"padding": padding}
        x = self.pos_drop(x if additions.entry is None else x + additions.entry)
        conditional = self.conditional
        if conditional is not None and -1 in conditional.positions:
            x = conditional(-1, x, grid, num_prefix_tokens, **extra)
        for i, block in enumerate(self.blocks):
            residual = additions.residual_at(i)
            if residual is not None:
                x = x + residual
            x = block(x, grid, num_prefix_tokens, additions.attention_at(i), additions.query_key_at(i), **extra)
            if taps is not None:
                taps.append(x)
            if conditional is not None and i in conditional.positions:
                x = conditional(i, x, grid, num_prefix_tokens, **extra)
        return x
