"""The conditional slot: position generators that look at the tokens between blocks."""

from __future__ import annotations

import torch
from torch import nn

from ..grid import Grid
from ..registry import CONDITIONAL
from ..spec import SlotSpec
from .base import SlotContext, SlotEntry

__all__ = ["ConditionalEncoding", "NoConditional"]


class ConditionalEncoding(SlotEntry, nn.Module):
    """Base class: applied at each of ``positions`` (-1 = before block 0, i = after block i).

    ``forward(position, x, grid, num_prefix_tokens)`` returns the new token sequence; prefix
    tokens pass through untouched.
    """

    positions: tuple[int, ...] = ()

    def forward(self, position: int, x: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:
        raise NotImplementedError


@CONDITIONAL.register("none")
class NoConditional(SlotEntry):
    """No conditional encoding."""

    @classmethod
    def from_spec(cls, spec: SlotSpec, ctx: SlotContext) -> None:
        return None
