"""timm's and DeiT's ViT layout: ``cls_token``, ``pos_embed`` (1, 1 + N, D), ``patch_embed.proj``,
``blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``, ``norm``, ``head``.

vitpos's ViT is a pyramid of one stage: ``patch_embed.proj`` becomes ``downsamples.0.proj``,
``blocks.N`` becomes ``stages.0.blocks.N``, and ``pos_embed``'s class-token row becomes
``stages.0.absolute.prefix_table`` and its grid rows ``stages.0.absolute.table``, resampled to
the model's grid when stored for another one (bicubically with antialias, as timm does; see
:mod:`.resize`). ``cls_token``, ``norm`` and
``head`` keep their names, as do a distilled DeiT's ``dist_token`` and ``head_dist`` (its
``pos_embed`` has a row for each prefix token). The iRPE and LaPE layouts are this one plus their own keys.
The LaPE repository's ``--pe 1D_sin`` stores its fixed sinusoid (class token at position 0)
without the batch axis, (1 + N, D); it loads as the model's learned table, so the forward pass
is exactly the stored one's (the authors freeze it; vitpos trains it unless frozen). A model with
``absolute="sincos1d:prefix"`` computes the same table (to float32 rounding): load into it with
``drop=("pos_embed",)``.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from ..encodings.absolute import AbsoluteEncoding
from ..spec import SlotSpec
from .layout import Layout, Target, square_side, take, take_prefix

__all__ = [
    "TimmViT",
    "STAGE",
    "convert_vit",
    "fit_position_table",
    "pos_embed_split",
    "submodule",
    "vit_geometry",
    "with_layer_scale",
    "without_prefix_row",
]

STAGE = "stages.0."
"""Where a ViT's slots and blocks live: its one stage."""

BLOCK_KEY = re.compile(
    r"blocks\.\d+\.((norm1|attn\.qkv|attn\.proj|norm2|mlp\.fc1|mlp\.fc2)\.(weight|bias)|ls[12]\.gamma)"
)
LAYER_SCALE_INIT = 1e-4
"""DeiT III's initial LayerScale value, selected for files with LayerScale (only initialisation reads it)."""
PREFIX_KEYS = ("cls_token", "dist_token")


def pos_embed_split(state: dict[str, torch.Tensor], key: str, prefix_tokens: int) -> tuple[int, int] | None:
    """(prefix rows, grid side) of a (1, P + s*s, D) table whose first rows may belong to prefix tokens."""
    rows = state[key].shape[-2]
    for prefix in (prefix_tokens, 0):
        side = square_side(rows - prefix)
        if side is not None:
            return prefix, side
    return None


def fit_position_table(state, out, target: Target, key: str, module: str, prefix_tokens: int) -> None:
    """Split ``state[key]`` into ``{module}.prefix_table`` and ``{module}.table`` at the module's grid."""
    absolute = submodule(target.model, module)
    split = pos_embed_split(state, key, prefix_tokens) if key in state else None
    if not isinstance(absolute, AbsoluteEncoding) or not absolute.learned_table or split is None:
        return
    prefix, side = split
    table = state.pop(key)
    target.origins[f"{module}.table"] = (key, tuple(table.shape))
    if table.dim() == 2:  # stored without the batch axis
        table = table[None]
    if prefix:
        out[f"{module}.prefix_table"] = table[:, :prefix]
    out[f"{module}.table"] = target.position_table(key, table[:, prefix:], (side, side), absolute.native_grid)


def submodule(model: torch.nn.Module, path: str) -> torch.nn.Module | None:
    """``model.get_submodule(path)``, or None where there is no module."""
    try:
        return model.get_submodule(path)
    except AttributeError:
        return None


def convert_vit(state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
    """The keys every timm-style ViT shares; pops them from ``state``."""
    out: dict[str, torch.Tensor] = {}
    prefix_tokens = sum(k in state for k in PREFIX_KEYS)
    fit_position_table(state, out, target, "pos_embed", STAGE + "absolute", prefix_tokens)
    take(state, out, "cls_token", "cls_token")
    take(state, out, "dist_token", "dist_token")
    take_prefix(state, out, "head_dist.", "head_dist.")
    take_prefix(state, out, "patch_embed.proj.", "downsamples.0.proj.")
    for name in ("norm.", "head."):
        take_prefix(state, out, name, name)
    for key in [k for k in state if BLOCK_KEY.fullmatch(k)]:
        out[STAGE + key] = state.pop(key)
    return out


def vit_geometry(state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
    """img_size of the grid ``pos_embed`` was stored for."""
    split = pos_embed_split(state, "pos_embed", sum(k in state for k in PREFIX_KEYS)) if "pos_embed" in state else None
    return {} if split is None else {"img_size": split[1] * cfg.patch_size}


def with_layer_scale(cfg: HostConfig) -> HostConfig:
    """``cfg`` with LayerScale (DeiT III's initial value where ``cfg`` has none)."""
    return cfg if cfg.layer_scale is not None else cfg.replace(layer_scale=LAYER_SCALE_INIT)


def without_prefix_row(cfg: HostConfig) -> HostConfig:
    """``cfg`` whose learned table has no prefix rows (``learned:noprefix``); other encodings unchanged."""
    absolute = SlotSpec.parse(cfg.position.absolute)
    if absolute.name != "learned" or "noprefix" in absolute.flags:
        return cfg
    return cfg.replace(
        absolute=str(SlotSpec(absolute.name, absolute.at, (*absolute.flags, "noprefix"), absolute.options))
    )


class TimmViT(Layout):
    """timm / DeiT ViT (also the plain ViTs of many other releases)."""

    name = "timm-vit"
    description = "timm and DeiT ViT: pos_embed, cls_token, blocks.N.attn.qkv"
    archs = ("vit",)
    width_key = ("patch_embed.proj.weight", 0)

    def matches(self, keys: set[str]) -> bool:
        return "blocks.0.attn.qkv.weight" in keys and "patch_embed.proj.weight" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        return convert_vit(state, target)

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        return vit_geometry(state, cfg)

    def file_config(self, cfg: HostConfig, state: dict[str, torch.Tensor]) -> HostConfig:
        """LayerScale where the file has ``ls1.gamma`` (timm's DeiT III), and a table without prefix rows where
        its ``pos_embed`` has none although it has a class token (timm's ``no_embed_class``)."""
        if "blocks.0.ls1.gamma" in state:
            cfg = with_layer_scale(cfg)
        prefix_tokens = sum(k in state for k in PREFIX_KEYS)
        split = pos_embed_split(state, "pos_embed", prefix_tokens) if "pos_embed" in state else None
        return without_prefix_row(cfg) if prefix_tokens and split is not None and split[0] == 0 else cfg

    def hint(self, unmapped: list[str]) -> str:
        if any(k.startswith(("dist_token", "head_dist")) for k in unmapped):
            return "a distilled DeiT (dist_token, head_dist): build the model with distilled=True (deit_*_distilled_*)"
        if any(".attn.rpe_" in k for k in unmapped):
            return (
                "the model has no iRPE; create the preset named after the released model (vitpos models 'deit_*_ctx_*')"
            )
        return ""
