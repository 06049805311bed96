"""The LaPE authors' ViT (Yu et al., ICCV 2023): a DeiT (:mod:`.vit` layout) whose blocks own a
``pe_norm`` LayerNorm of the position embedding.

Their forward pass chains the norms, pe_l = LN_pe,l(pe_{l-1}) with pe_{-1} = ``pos_embed``,
and adds pe_l to block l's normalised attention input; the tokens enter block 0 without it.
That is vitpos's ``lape:chained`` join (Eq. 9 normalises the same pe in every layer, the
default); loading selects it. The per-block norms become the rows of ``join.pe_norm``.

A training checkpoint of the LaPE repository (``main.py`` saves its arguments as ``args``) made
with ``--join-type share`` adds ``pos_embed`` before every block but holds plain DeiT keys;
its ``args`` name the join, and loading selects vitpos's ``shared`` join (:func:`released_join`).
A bare state dict of such a model cannot be told from a DeiT's: build it with ``join="shared"``.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from ..spec import SlotSpec
from .layout import Layout, Target
from .vit import STAGE, convert_vit, vit_geometry

__all__ = ["LapeViT", "released_join"]

PE_NORM_KEY = re.compile(r"blocks\.(\d+)\.pe_norm\.(weight|bias)")


def convert_pe_norms(state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
    """Stack ``blocks.N.pe_norm.{weight,bias}`` into ``stages.0.join.pe_norm.{weight,bias}`` (layers, D)."""
    rows: dict[str, dict[int, str]] = {"weight": {}, "bias": {}}
    for key in state:
        match = PE_NORM_KEY.fullmatch(key)
        if match:
            rows[match.group(2)][int(match.group(1))] = key
    out = {}
    for kind, keys in rows.items():
        if keys and sorted(keys) == list(range(len(keys))):
            out[f"{STAGE}join.pe_norm.{kind}"] = torch.stack([state.pop(keys[i]) for i in range(len(keys))])
    return out


JOIN_TYPES = {"share": "shared"}
"""The LaPE repository's ``--join-type`` values whose keys look like a plain DeiT's, and vitpos's join for each."""


def released_join(args: dict[str, Any]) -> str | None:
    """The join a released training checkpoint's stored arguments name, when its keys do not show it."""
    return JOIN_TYPES.get(args.get("join_type", ""))


class LapeViT(Layout):
    """DeiT with LaPE as released by its authors."""

    name = "lape"
    description = "LaPE authors' ViT: DeiT with blocks.N.pe_norm"
    archs = ("vit",)

    def matches(self, keys: set[str]) -> bool:
        return any(PE_NORM_KEY.fullmatch(k) for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        return {**convert_pe_norms(state, target), **convert_vit(state, target)}

    def released_config(self, cfg: HostConfig) -> HostConfig:
        join = SlotSpec.parse(cfg.position.join)
        if join.name == "lape" and "chained" in join.flags:
            return cfg
        return cfg.replace(join="lape:chained")

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        return vit_geometry(state, cfg)
