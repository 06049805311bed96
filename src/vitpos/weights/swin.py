"""Swin Transformer checkpoints: Microsoft's release and timm's.

Both name blocks ``layers.S.blocks.M.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``
with ``attn.relative_position_bias_table`` ((2W-1)^2, heads), and the stem
``patch_embed.{proj, norm}``, the final ``norm`` and the classifier ``head`` (timm:
``head.fc``). They differ in where patch merging lives: Microsoft's code (and timm before
0.9) puts ``layers.S.downsample`` at the end of stage S, timm's current code at the start of
stage S. vitpos's ``downsamples.S`` starts stage S. The ``relative_position_index`` and
``attn_mask`` buffers are derived from the window size and are not loaded. A stage whose grid
is smaller than the window has a table for the grid-sized window (Swin shrinks it); it fills
the centre of vitpos's table. A table stored for another window size is resized to the model's
window geometrically, as timm does (:mod:`.resize`; bicubically with ``resize="model"``).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from .layout import Layout, Target, square_side, take_prefix
from .vit import submodule

__all__ = ["MicrosoftSwin", "TimmSwin"]

BLOCK_KEY = re.compile(
    r"layers\.(\d+)\.blocks\.(\d+)\.(norm1|norm2|attn\.qkv|attn\.proj|mlp\.fc1|mlp\.fc2)\.(weight|bias)"
)
TABLE_KEY = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.attn\.relative_position_bias_table")
DERIVED_KEY = re.compile(r"layers\.\d+\.blocks\.\d+\.(attn\.relative_position_index|attn_mask)")
DOWNSAMPLE_KEY = re.compile(r"layers\.(\d+)\.downsample\.(norm|reduction)\.(weight|bias)")


class MicrosoftSwin(Layout):
    """microsoft/Swin-Transformer (and timm < 0.9): patch merging at the end of each stage."""

    name = "swin"
    description = "Microsoft's Swin: layers.S.blocks.M, layers.S.downsample ending stage S"
    archs = ("swin",)
    downsample_shift = 1
    """vitpos's downsamples index of ``layers.S.downsample`` is S + this (1: merging ends a stage, 0: starts it)."""
    marker = "layers.0.blocks.0.attn.qkv.weight"
    """A key every file of the family holds."""

    def matches(self, keys: set[str]) -> bool:
        ends_stage_0 = any(k.startswith("layers.0.downsample.") for k in keys)
        return self.marker in keys and ends_stage_0 == (self.downsample_shift == 1)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        cfg = getattr(target.model, "cfg", None)
        window = getattr(cfg, "window_size", None)
        for key in list(state):
            if (match := BLOCK_KEY.fullmatch(key)) is not None:
                stage, block, part, kind = match.groups()
                out[f"stages.{stage}.blocks.{block}.{part}.{kind}"] = state.pop(key)
            elif (match := TABLE_KEY.fullmatch(key)) is not None and window is not None and cfg is not None:
                stage, block = int(match.group(1)), match.group(2)
                dst = _table_key(target.model, f"stages.{stage}.blocks.{block}.attn.relative")
                reduced = min(window, *cfg.stage_grid(stage))  # Swin's window on a stage smaller than it
                out[dst] = target.window_table(key, state.pop(key).transpose(0, 1), window, reduced)
            elif DERIVED_KEY.fullmatch(key):
                state.pop(key)
            elif (match := DOWNSAMPLE_KEY.fullmatch(key)) is not None:
                stage, part, kind = match.groups()
                out[f"downsamples.{int(stage) + self.downsample_shift}.{part}.{kind}"] = state.pop(key)
        take_prefix(state, out, "patch_embed.", "downsamples.0.")
        take_prefix(state, out, "norm.", "norm.")
        take_prefix(state, out, "head.fc.", "head.")
        take_prefix(state, out, "head.", "head.")
        return out

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        table = state.get("layers.0.blocks.0.attn.relative_position_bias_table")
        side = None if table is None else square_side(table.shape[0])
        return {} if side is None else {"window_size": (side + 1) // 2}

    def hint(self, unmapped: list[str]) -> str:
        if "absolute_pos_embed" in unmapped:
            return "Swin with an absolute position embedding (ape=True) has no vitpos preset; use a model without it"
        return ""


def _table_key(model: torch.nn.Module, path: str) -> str:
    return f"{path}.encoding.table" if hasattr(submodule(model, path), "encoding") else f"{path}.table"


class TimmSwin(MicrosoftSwin):
    """timm >= 0.9: patch merging at the start of stage S, classifier ``head.fc``."""

    name = "timm-swin"
    description = "timm's Swin: layers.S.downsample starting stage S, head.fc"
    downsample_shift = 0
