"""The join slot: where and how the absolute signal enters the blocks.

``input`` adds it once (ViT/DeiT); ``shared`` and ``unshared`` add it before every block (the
joining methods LaPE's Table 4 compares against); ``lape`` lives in :mod:`.lape`.

A join is a pure function of its parameters: :meth:`Join.additions` maps the absolute encoding
of the whole sequence ``pe`` (1, P + H*W, D) and the grid to a :class:`JoinAdditions`, which
:meth:`vitpos.models.stage.Stage.forward` asks for once per forward and applies:

* ``entry`` — added to the tokens before block 0 (before ``pos_drop`` and a conditional
  generator at -1);
* ``residual[i]`` — added to the residual stream entering block ``i``;
* ``attention[i]`` — added to block ``i``'s normalised attention input, so it reaches the
  queries, keys and values (LaPE);
* ``query_key[i]`` — added to block ``i``'s query and key inputs only (``q = W_q (h + pos)``,
  ``k = W_k (h + pos)``, ``v = W_v h``), as DETR's encoder does at every layer
  (:mod:`.detr_join`).

Nothing is carried from one call to the next, or from one block to the next.

What a join does to the relative encodings is fixed at construction: the host passes each
block's relative encoding through :meth:`Join.adapt_relative` (LaPE wraps a bias in
:class:`~.lape.NormalisedBias`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..grid import Grid, GridCache, resample_table, tracing
from ..padding import Padding
from ..registry import ABSOLUTE, JOIN
from .base import SlotContext, SlotEntry
from .relative.base import RelativePosition

if TYPE_CHECKING:
    from ..config import PositionConfig

__all__ = ["JoinAdditions", "Join", "InputJoin", "SharedJoin", "UnsharedJoin", "require_absolute", "padded_additions"]

PerBlock = tuple[torch.Tensor | None, ...]
"""One entry per block, from block 0; blocks past the end get nothing."""


@dataclass(frozen=True)
class JoinAdditions:
    """What a join adds in one forward pass at one grid (see the module docstring).

    Every tensor broadcasts to the token sequence (B, P + H*W, D).
    """

    entry: torch.Tensor | None = None
    residual: PerBlock = ()
    attention: PerBlock = ()
    query_key: PerBlock = ()

    def residual_at(self, index: int) -> torch.Tensor | None:
        """The term added to the residual stream entering block ``index``, or None."""
        return self.residual[index] if index < len(self.residual) else None

    def attention_at(self, index: int) -> torch.Tensor | None:
        """The term added to block ``index``'s normalised attention input, or None."""
        return self.attention[index] if index < len(self.attention) else None

    def query_key_at(self, index: int) -> torch.Tensor | None:
        """The term added to block ``index``'s query and key inputs only (not its values), or None."""
        return self.query_key[index] if index < len(self.query_key) else None


def padded_additions(
    join: Join, encode: Callable[[Grid], torch.Tensor | None], padding: Padding, num_prefix_tokens: int
) -> JoinAdditions:
    """What ``join`` adds to a padded batch: each image gets the additions of its own valid grid,
    computed from ``encode(valid grid)`` (the absolute encoding there) and placed at its prefix and
    top-left cells, so every encoding and join treats it as that image alone (tables resampled to
    its valid grid, DETR's sine normalised over it); padded cells get nothing."""
    made = {size: join.additions(encode(size), size) for size in dict.fromkeys(padding.sizes())}
    first = next(iter(made.values()))

    def place(pick: Callable[[JoinAdditions], torch.Tensor | None]) -> torch.Tensor | None:
        if pick(first) is None:
            return None
        return padding.place(lambda size: _present(pick(made[size])), num_prefix_tokens)

    def per_block(field: str) -> PerBlock:
        def pick(index: int) -> Callable[[JoinAdditions], torch.Tensor | None]:
            return lambda additions: getattr(additions, field)[index]

        return tuple(place(pick(i)) for i in range(len(getattr(first, field))))

    return JoinAdditions(
        place(lambda a: a.entry), per_block("residual"), per_block("attention"), per_block("query_key")
    )


def _present(t: torch.Tensor | None) -> torch.Tensor:
    assert t is not None  # every valid grid gets the same kinds of additions
    return t


class Join(SlotEntry, nn.Module):
    """Base class: a join adds nothing. Subclasses override :meth:`additions`.

    Built by ``build(ctx, options, has_absolute=...)``: the stage says whether it has an absolute
    encoding (without one, ``pe`` is None at every call; LaPE then owns no LN_pe parameters).
    """

    def __init__(self, ctx: SlotContext, has_absolute: bool = True) -> None:
        super().__init__()
        self.depth = ctx.depth
        self.has_absolute = has_absolute

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        """What this join adds for the absolute encoding ``pe`` (1, P + H*W, D) or None, at ``grid``."""
        return JoinAdditions()

    def adapt_relative(self, index: int, relative: RelativePosition | None) -> RelativePosition | None:
        """The relative encoding block ``index`` should use (e.g. wrapped); unchanged by default."""
        return relative


def require_absolute(position: PositionConfig, join: str, why: str) -> None:
    """Raise ``ValueError`` if ``position`` has no absolute encoding for join ``join`` to use."""
    if position.spec("absolute").name == "none":
        raise ValueError(
            f"join '{join}' {why}, but absolute='none'; choose an absolute encoding "
            f"(e.g. absolute='learned' or 'sincos2d') or join='input'"
        )


@JOIN.register("input")
class InputJoin(Join):
    """ViT/DeiT: add the encoding to the tokens once, before the first block."""

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        return JoinAdditions(entry=pe)


@JOIN.register("shared")
class SharedJoin(Join):
    """The same encoding added to the tokens before every block (LaPE Table 4, "shared PE").

    As in the authors' code the tokens enter without it (``pos_drop`` and a PEG at -1 see the
    bare tokens) and every block input, block 0 included, gets ``x + pe``; the residual stream
    therefore accumulates ``l + 1`` copies by block ``l``.
    """

    @classmethod
    def check_combination(cls, position: PositionConfig) -> None:
        require_absolute(position, "shared", "adds the absolute encoding before every block")

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        return JoinAdditions(residual=(pe,) * self.depth)


def _learned_table_values() -> list[str]:
    return [name for name in ABSOLUTE.names() if getattr(ABSOLUTE.get(name), "learned_table", False)]


@JOIN.register("unshared")
class UnsharedJoin(Join):
    """A distinct learned encoding per layer, added before each block (LaPE Table 4, "unshared PE").

    Block 0 adds the absolute encoding's own table (``pe``); blocks 1..depth-1 each own a table
    shaped like it — one vector per prefix token, then one per cell of the native grid,
    trunc-normal std 0.02 — whose cells are resampled bicubically at other grids (prefix rows
    are kept; in inference once per grid). So a model has ``depth`` tables in all, as in the authors' code. Only for
    encodings with a free table (``learned_table``); a fixed one has nothing to unshare.
    """

    def __init__(self, ctx: SlotContext, has_absolute: bool = True) -> None:
        super().__init__(ctx, has_absolute)
        h, w = ctx.grid
        self.native_grid: Grid = (h, w)
        self.num_prefix_tokens = ctx.num_prefix_tokens
        self.tables = nn.Parameter(torch.empty(ctx.depth - 1, ctx.num_prefix_tokens + h * w, ctx.embed_dim))
        nn.init.trunc_normal_(self.tables, std=0.02)
        self._resampled: GridCache[torch.Tensor] = GridCache()

    @classmethod
    def check_combination(cls, position: PositionConfig) -> None:
        absolute = position.spec("absolute").name
        if not getattr(position.entry("absolute"), "learned_table", False):
            raise ValueError(
                f"join 'unshared' learns a separate table per layer, which needs a learned absolute "
                f"encoding ({', '.join(_learned_table_values())}), got absolute='{absolute}'; "
                f"use join='shared' to add a fixed encoding before every block"
            )

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        return JoinAdditions(residual=(pe, *self.layer_tables(grid).split(1)))

    def layer_table(self, index: int, grid: Grid) -> torch.Tensor:  # 1, P + H*W, D
        """The own table of block ``index`` (1..depth-1) at ``grid``."""
        if not 1 <= index < self.depth:
            raise IndexError(f"block {index} has no own table; blocks 1..{self.depth - 1} do (block 0 uses pe)")
        return self.layer_tables(grid)[index - 1 : index]

    def layer_tables(self, grid: Grid) -> torch.Tensor:  # depth - 1, P + H*W, D
        """The own tables of blocks 1..depth-1 at ``grid``: resampled in one call off the native grid,
        and cached per grid while no gradient is recorded (``python -m bench.attention.caches``: recomputing
        them costs 7-8% of a DeiT-S forward at 288 px; see BENCHMARKS.md)."""
        tables = self.tables
        if not tracing() and tuple(grid) == self.native_grid:
            return tables
        key = (tuple(grid), tables.device, tables.dtype)
        return self._resampled.get(key, lambda: self._resample(grid), [tables])

    def _resample(self, grid: Grid) -> torch.Tensor:
        p, tables = self.num_prefix_tokens, self.tables
        return torch.cat([tables[:, :p], resample_table(tables[:, p:], self.native_grid, grid)], dim=1)
