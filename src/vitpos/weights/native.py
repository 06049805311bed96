"""vitpos's own checkpoints (``vitpos convert`` output, run folders, ``model.state_dict()``): loaded as
they are, with the plain ViT's earlier parameter names renamed (:func:`~vitpos.models.vit.upgrade_state_dict`).

A learned table saved for another grid (a model trained at 224 px loaded into a 320-px one) is fitted to the
model's grid as ``resize`` says (default ``"model"``: the model's own run-time resampling, so the 320-px model
equals the 224-px one run on 320-px images); the saved grid is the square, or the model's aspect ratio, its
row count gives.
"""

from __future__ import annotations

import math
import re

import torch

from ..encodings.absolute import AbsoluteEncoding
from ..encodings.join import UnsharedJoin
from ..grid import Grid
from ..models.vit import upgrade_state_dict
from .layout import Layout, Target

__all__ = ["Native"]

NATIVE_PREFIXES = ("absolute.", "join.", "conditional.")
"""The earlier ViT's slots at the top level."""
NATIVE_PART = re.compile(r"(?:^|\.)(?:stages|downsamples)\.\d+\.|\.attn\.relative\.")
"""Names only vitpos writes: a host's stages wherever it sits (a segmenter's ``backbone.``, DETR's ``encoder.``)."""


class Native(Layout):
    """A vitpos state dict; names already match the model."""

    name = "vitpos"
    description = "vitpos state dicts and checkpoints"
    archs = ()  # any vitpos model
    resize = "model"
    suggests_presets = False  # its own config names its model

    def matches(self, keys: set[str]) -> bool:
        return any(k.startswith(NATIVE_PREFIXES) or NATIVE_PART.search(k) for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        own = set(target.model.state_dict())
        renamed = upgrade_state_dict({k: k for k in state})
        out = {new: state.pop(old) for new, old in renamed.items() if new in own}
        _fit_tables(out, target)
        return out


def _saved_grid(cells: int, native: Grid) -> Grid | None:
    """The grid of ``cells`` cells a table was saved for: a square, else one of the ``native`` grid's aspect ratio."""
    side = math.isqrt(cells)
    if side * side == cells:
        return (side, side)
    h, w = native
    found = [(r, cells // r) for r in range(1, cells + 1) if cells % r == 0 and r * w == (cells // r) * h]
    return found[0] if found else None


def _fit_tables(weights: dict[str, torch.Tensor], target: Target) -> None:
    """Fit every learned table of ``weights`` saved for another grid to the model's (absolute and per-layer)."""
    for name, module in target.model.named_modules():
        if isinstance(module, AbsoluteEncoding) and module.learned_table:
            key, prefix = f"{name}.table", 0
        elif isinstance(module, UnsharedJoin):
            key, prefix = f"{name}.tables", module.num_prefix_tokens
        else:
            continue
        table = weights.get(key)
        native = module.native_grid
        if table is None or table.dim() != 3 or table.shape[1] - prefix == native[0] * native[1]:
            continue
        saved = _saved_grid(table.shape[1] - prefix, native)
        if saved is None:
            continue  # reported as a shape that differs
        target.origins[key] = (key, tuple(table.shape))
        cells = target.position_table(key, table[:, prefix:], saved, native)
        weights[key] = torch.cat([table[:, :prefix], cells], dim=1)
