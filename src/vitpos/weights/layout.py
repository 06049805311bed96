"""What every checkpoint layout provides, the target it converts onto, and layout detection.

A layout maps the parameter names and shapes of one family of released checkpoints onto a
vitpos model: :meth:`Layout.convert` pops every key it understands from a copy of the state
dict and returns the vitpos weights; keys left over are reported as unmapped.
:meth:`Layout.released_config` selects the options that reproduce the released forward pass
(the paper stays the default elsewhere), and :meth:`Layout.stored_geometry` gives the input
and window sizes the checkpoint was trained at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError
from ..grid import Grid
from .resize import Resize, fit_bias_table, fit_position_table

__all__ = ["HEAD_WIDTH", "HEAD_WIDTH_NOTE", "Layout", "Target", "shapes_of", "square_side", "take", "take_prefix"]

HEAD_WIDTH = 64
"""The channels of one attention head in the Compact Transformers', T2T-ViT's and DeiT III's released models
(CCT-2 128 / 2 heads ... CCT-14 384 / 6, T2T-ViT-7 256 / 4 ... T2T-ViT-24 512 / 8, DeiT III S 384 / 6 ... L 1024 /
16): a width read from a file's shapes gives the head count they assume, as the shapes do not show it
(T2T-ViT-14-resnext, 384 wide, has 32 heads: its files need ``num_heads=32``)."""


HEAD_WIDTH_NOTE = f"{HEAD_WIDTH} channels a head, as in the authors' released models"


def square_side(count: int) -> int | None:
    """s if ``count`` = s * s, else None."""
    side = math.isqrt(count)
    return side if side * side == count else None


@dataclass
class Target:
    """The model weights are converted onto, and how tables of another size are treated."""

    model: nn.Module
    source: Path | str
    resample: bool = True
    """Resample position tables to the model's grid and Swin tables to its window; else a size
    mismatch is an error."""
    resize: Resize = "model"
    """How tables are resampled (:mod:`.resize`): as timm does on load, or as the model does at run time."""
    origins: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    """The file's key and shape of each table fitted to the model (by the model's key), for messages."""

    def position_table(self, key: str, table: torch.Tensor, stored: Grid, native: Grid) -> torch.Tensor:
        """A (1, H*W, D) table stored for grid ``stored``, fitted to the model's ``native`` grid."""
        if tuple(stored) == tuple(native):
            return table
        if not self.resample:
            raise CheckpointError(
                f"checkpoint {self.source}: {key} is stored for a {stored[0]}x{stored[1]} grid, the model's is "
                f"{native[0]}x{native[1]}; allow resampling (resample=True), or build the model at the stored "
                "size (keep_grid=True) and let it resample at run time"
            )
        return fit_position_table(table, stored, native, self.resize)

    def window_table(self, key: str, table: torch.Tensor, native: int, reduced: int) -> torch.Tensor:
        """A Swin bias table (heads, (2M-1)^2) fitted to the model's window ``native``.

        A stage whose grid is smaller than the window has a table for its reduced window
        ``reduced`` (Swin shrinks the window to the grid): it fills the centre of the model's
        table, whose other offsets that stage never uses. A table for any other window is
        resized as :attr:`resize` says (or refused without ``resample``).
        """
        side = square_side(table.shape[-1])
        target = 2 * native - 1
        if side is None or side == target:
            return table
        if side == 2 * reduced - 1 and reduced < native:
            pad = native - reduced
            maps = table.reshape(-1, side, side)
            return F.pad(maps, (pad, pad, pad, pad)).reshape(table.shape[0], target * target)
        if not self.resample:
            raise CheckpointError(
                f"checkpoint {self.source}: {key} is stored for window {(side + 1) // 2}, the model's window is "
                f"{native}; allow resampling (resample=True) or build the model with window_size={(side + 1) // 2}"
            )
        return fit_bias_table(table, target, self.resize)


class Layout:
    """One family of released checkpoints; subclasses set the names and implement the mapping."""

    name = ""
    """Short name used in messages and ``vitpos convert``."""
    description = ""
    """Where such checkpoints come from."""
    archs: tuple[str, ...] = ()
    """vitpos hosts this layout loads into (empty: any vitpos model)."""
    resize: Resize = "timm"
    """How its tables are fitted to another size by default (:mod:`.resize`)."""
    presets: tuple[str, ...] = ("*",)
    """Shell patterns of the presets a file of this layout is guessed among."""
    suggests_presets = True
    """Whether a refusal tries the presets to name the ones a file of this layout fits."""
    assumed: tuple[tuple[str, str], ...] = ()
    """Fields :meth:`stored_shapes` gives that the shapes do not show, each with the assumption made."""
    ambiguity: str = ""
    """Why several presets may fit one file, for the message that says so."""
    width_key: tuple[str, int] | None = None
    """A key and the axis of its shape that give the first stage's width (the stem's output), or None."""

    def matches(self, keys: set[str]) -> bool:
        """True if a state dict with these keys is in this layout."""
        raise NotImplementedError

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        """Pop every understood key from ``state`` (a copy) and return the vitpos weights."""
        raise NotImplementedError

    def released_config(self, cfg: HostConfig) -> HostConfig:
        """``cfg`` with the options that reproduce the released forward pass (default: unchanged)."""
        return cfg

    def file_config(self, cfg: HostConfig, state: dict[str, torch.Tensor]) -> HostConfig:
        """``cfg`` with the options this file's keys show it needs beyond :meth:`released_config` (default: none)."""
        return cfg

    def options_note(self) -> str:
        """What to tell a caller whose model lacks the released options, where the file's keys allow several."""
        return ""

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """Config overrides that give the model the grid (and window) the checkpoint was trained at."""
        return {}

    def stored_shapes(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Config fields read from the file's keys and shapes (a released variant's stem, depth and widths), for
        files no preset fits as it is; empty where the layout reads none."""
        return {}

    def could_fit(self, cfg: HostConfig, state: dict[str, torch.Tensor]) -> bool:
        """False where ``cfg``'s first width alone shows that the file cannot fill its model (saves building it)."""
        if self.width_key is None or self.width_key[0] not in state:
            return True
        key, axis = self.width_key
        return cfg.embed_dims[0] == state[key].shape[axis]

    def trained_preset(self, args: dict[str, Any], state: dict[str, torch.Tensor]) -> str | None:
        """The preset a file's stored training arguments (or values its shapes do not show) name, or None."""
        return None

    def shape_summary(self, state: dict[str, torch.Tensor]) -> str:
        """The keys and shapes :meth:`stored_shapes` reads, as a message shows them."""
        return ""

    def hint(self, unmapped: list[str]) -> str:
        """Advice for keys this layout left unmapped."""
        return ""


def shapes_of(state: dict[str, torch.Tensor], keys: list[str]) -> str:
    """``key (shape)`` for each of ``keys`` that ``state`` holds."""
    return ", ".join(f"{k} {tuple(state[k].shape)}" for k in keys if k in state)


def take(state: dict[str, torch.Tensor], out: dict[str, torch.Tensor], src: str, dst: str) -> None:
    """Move ``state[src]`` to ``out[dst]`` if present."""
    if src in state:
        out[dst] = state.pop(src)


def take_prefix(state: dict[str, torch.Tensor], out: dict[str, torch.Tensor], src: str, dst: str) -> None:
    """Move every key starting with ``src`` to the same key with the prefix ``dst``."""
    for key in [k for k in state if k.startswith(src)]:
        out[dst + key[len(src) :]] = state.pop(key)
