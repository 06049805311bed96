"""The join slot: where and how the absolute signal enters the blocks.

``input`` adds it once (ViT/DeiT); ``shared`` and ``unshared`` add it before every block (the
joining methods LaPE's Table 4 compares against); ``lape`` lives in :mod:`.lape`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ..grid import Grid, resample_table, tracing
from ..registry import ABSOLUTE, JOIN
from .base import SlotContext, SlotEntry
from .cache import EvalMemo
from .relative.base import RelativePosition

if TYPE_CHECKING:
    from ..config import PositionConfig

__all__ = ["Join", "InputJoin", "SharedJoin", "UnsharedJoin", "require_absolute"]


class Join(SlotEntry, EvalMemo):
    """Base class. ``pe`` is the absolute encoding of the whole sequence, (1, P + H*W, D), or None;
    its prefix rows are zero unless the encoding learns prefix vectors (DeiT's learned one does).

    The host calls :meth:`bind_absolute` once at construction, then passes each block's relative
    encoding through :meth:`adapt_relative`. Per forward it calls :meth:`enter` once before
    block 0, then for every block ``i`` :meth:`before_block` on the residual stream and
    :meth:`attention_pos`, whose result is added to the block's normalised attention input, and
    :meth:`attention_qk_pos`, added to its query and key inputs only (``detr``).
    """

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__(maxsize=8 * ctx.depth)  # room for per-layer entries at several grids
        self.depth = ctx.depth
        self._absolute: tuple[nn.Module | None] | None = None

    def bind_absolute(self, absolute: nn.Module | None) -> None:
        """Record the module whose ``with_prefix(grid)`` is ``pe`` (None: the model has none)."""
        # a tuple, not an attribute module: the encoding stays registered once, under the host
        self._absolute = (absolute,)

    def absolute_parameters(self) -> tuple[torch.Tensor, ...] | None:
        """The parameters ``pe`` depends on, or None while no encoding is bound (then nothing
        derived from ``pe`` may be cached, since its source is unknown)."""
        if self._absolute is None:
            return None
        source = self._absolute[0]
        return () if source is None else tuple(source.parameters())

    def enter(self, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        """Tokens entering block 0."""
        return x

    def before_block(self, index: int, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        """The residual stream entering block ``index``."""
        return x

    def attention_pos(self, index: int, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor | None:
        """A term added to block ``index``'s normalised attention input, or None."""
        return None

    def attention_qk_pos(self, index: int, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor | None:
        """A term added to block ``index``'s query and key inputs only (not values), or None."""
        return None

    def adapt_relative(self, index: int, relative: RelativePosition | None) -> RelativePosition | None:
        """The relative encoding block ``index`` should use (e.g. wrapped); unchanged by default."""
        return relative


def require_absolute(position: "PositionConfig", join: str, why: str) -> None:
    """Raise ``ValueError`` if ``position`` has no absolute encoding for join ``join`` to use."""
    if position.spec("absolute").name == "none":
        raise ValueError(
            f"join '{join}' {why}, but absolute='none'; choose an absolute encoding "
            f"(e.g. absolute='learned' or 'sincos2d') or join='input'"
        )


@JOIN.register("input")
class InputJoin(Join):
    """ViT/DeiT: add the encoding to the tokens once, before the first block."""

    def enter(self, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        return x if pe is None else x + pe


@JOIN.register("shared")
class SharedJoin(Join):
    """The same encoding added to the tokens before every block (LaPE Table 4, "shared PE").

    As in the authors' code the tokens enter without it (``pos_drop`` and a PEG at -1 see the
    bare tokens) and every block input, block 0 included, gets ``x + pe``; the residual stream
    therefore accumulates ``l + 1`` copies by block ``l``.
    """

    @classmethod
    def check_combination(cls, position: "PositionConfig") -> None:
        require_absolute(position, "shared", "adds the absolute encoding before every block")

    def before_block(self, index: int, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        return x if pe is None else x + pe


def _learned_table_values() -> list[str]:
    return [name for name in ABSOLUTE.names() if getattr(ABSOLUTE.get(name), "learned_table", False)]


@JOIN.register("unshared")
class UnsharedJoin(Join):
    """A distinct learned encoding per layer, added before each block (LaPE Table 4, "unshared PE").

    Block 0 adds the absolute encoding's own table (``pe``); blocks 1..depth-1 each own a table
    shaped like it — one vector per prefix token, then one per cell of the native grid,
    trunc-normal std 0.02 — whose cells are resampled bicubically at other grids (prefix rows
    are kept). So a model has ``depth`` tables in all, as in the authors' code. Only for
    encodings with a free table (``learned_table``); a fixed one has nothing to unshare.
    """

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__(ctx)
        self.native_grid: Grid = tuple(ctx.grid)
        self.num_prefix_tokens = ctx.num_prefix_tokens
        h, w = self.native_grid
        self.tables = nn.Parameter(torch.empty(ctx.depth - 1, ctx.num_prefix_tokens + h * w, ctx.embed_dim))
        nn.init.trunc_normal_(self.tables, std=0.02)

    @classmethod
    def check_combination(cls, position: "PositionConfig") -> None:
        absolute = position.spec("absolute").name
        if not getattr(position.entry("absolute"), "learned_table", False):
            raise ValueError(
                f"join 'unshared' learns a separate table per layer, which needs a learned absolute "
                f"encoding ({', '.join(_learned_table_values())}), got absolute='{absolute}'; "
                f"use join='shared' to add a fixed encoding before every block"
            )

    def before_block(self, index: int, x: torch.Tensor, pe: torch.Tensor | None, grid: Grid) -> torch.Tensor:
        table = pe if index == 0 else self.layer_table(index, grid)
        return x if table is None else x + table

    def layer_table(self, index: int, grid: Grid) -> torch.Tensor:  # 1, P + H*W, D
        """The own table of block ``index`` (1..depth-1) at ``grid``; resampled ones are memoised in eval."""
        if not 1 <= index < self.depth:
            raise IndexError(f"block {index} has no own table; blocks 1..{self.depth - 1} do (block 0 uses pe)")
        table = self.tables[index - 1 : index]
        if not tracing() and tuple(grid) == self.native_grid:
            return table
        key = (tuple(grid), index, table.device, table.dtype)
        return self.memo(key, lambda: self._resample(table, grid), [self.tables])

    def _resample(self, table: torch.Tensor, grid: Grid) -> torch.Tensor:
        p = self.num_prefix_tokens
        cells = resample_table(table[:, p:], self.native_grid, grid)
        return torch.cat([table[:, :p], cells], dim=1)
