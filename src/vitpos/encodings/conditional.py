"""The conditional slot: position generators that look at the tokens between blocks.

A conditional encoding is applied at a set of *positions*: ``-1`` is the patch tokens before
block 0 and ``i`` the output of block ``i``. Placements are written as in CPVT: a comma list of
single positions and ranges, where ``i-j`` means after blocks i, i+1, ..., j-1 (so ``0-5`` is
0, 1, 2, 3, 4 and ``0-1`` is just 0), e.g. ``-1``, ``0``, ``0-5``, ``-1,3,6-8``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..errors import quote
from ..grid import Grid
from ..padding import Padding
from ..registry import CONDITIONAL
from ..spec import SpecError
from .base import SlotContext, SlotEntry

__all__ = ["ConditionalEncoding", "NoConditional", "parse_positions", "format_positions", "check_depth"]

BEFORE_FIRST_BLOCK = -1
_ITEM = re.compile(r"^(-?\d+)(?:-(-?\d+))?$")
MAX_POSITION = 4095
"""The largest position a placement names (after block 4095); deeper models do not exist."""


def parse_positions(text: str) -> tuple[int, ...]:
    """Parse a placement like ``0``, ``-1``, ``0-5`` (= 0..4) or ``-1,3,6-8`` into sorted positions."""
    positions: list[int] = []
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if match is None:
            raise SpecError(
                f"cannot read position {item!r} in placement {text!r}: use integers, ranges 'i-j' "
                "(after blocks i..j-1) and commas, e.g. '0', '-1', '0-5', '-1,3,6-8'"
            )
        start, stop = match.group(1), match.group(2)
        first = int(start)
        last = first if stop is None else int(stop) - 1
        if max(first, last) > MAX_POSITION:
            raise SpecError(
                f"position {quote(max(first, last))} in placement {text[:80]!r} is beyond any model's depth: "
                f"positions go up to {MAX_POSITION} (after block {MAX_POSITION})"
            )
        if stop is None:
            items = [first]
        elif int(stop) <= first:
            raise SpecError(
                f"empty range {item!r} in placement {text!r}: 'i-j' means after blocks i..j-1, "
                f"so j must be greater than i (e.g. '{first}-{first + 1}' for block {first} alone)"
            )
        else:
            items = list(range(first, int(stop)))
        for position in items:
            if position < BEFORE_FIRST_BLOCK:
                raise SpecError(
                    f"position {position} in placement {text!r} is invalid: positions start at -1 "
                    "(before block 0); i >= 0 means after block i"
                )
            if position in positions:
                raise SpecError(f"position {position} appears twice in placement {text!r}")
            positions.append(position)
    return tuple(sorted(positions))


def format_positions(positions: tuple[int, ...] | list[int]) -> str:
    """The shortest placement string for ``positions``: runs become ``i-j`` (after blocks i..j-1)."""
    if not positions:
        raise ValueError("a placement needs at least one position")
    ordered = sorted(set(positions))
    runs: list[list[int]] = [[ordered[0], ordered[0]]]
    for position in ordered[1:]:
        if position == runs[-1][1] + 1:
            runs[-1][1] = position
        else:
            runs.append([position, position])
    return ",".join(str(a) if a == b else f"{a}-{b + 1}" for a, b in runs)


def check_depth(value: str, positions: tuple[int, ...], depth: int) -> None:
    """Raise if a position lies past the last block of a ``depth``-block model."""
    bad = [p for p in positions if p >= depth]
    if bad:
        raise ValueError(
            f"'{value}': position(s) {', '.join(map(str, bad))} do not exist in a model of depth {depth}; "
            f"positions run from -1 (before block 0) to {depth - 1} (after the last block)"
        )


class ConditionalEncoding(SlotEntry, nn.Module):
    """Base class: applied at each of ``positions`` (-1 = before block 0, i = after block i).

    ``forward(position, x, grid, num_prefix_tokens, padding=None)`` returns the new token sequence;
    prefix tokens pass through untouched. With ``padding`` (a padded batch) each image's valid
    cells get what they would get if the image ran alone.
    """

    positions: tuple[int, ...] = ()

    def forward(
        self, position: int, x: torch.Tensor, grid: Grid, num_prefix_tokens: int, padding: Padding | None = None
    ) -> torch.Tensor:
        raise NotImplementedError


@CONDITIONAL.register("none")
class NoConditional(SlotEntry):
    """No conditional encoding."""

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], **host: Any) -> None:
        return None
