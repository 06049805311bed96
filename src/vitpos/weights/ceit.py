"""CeiT checkpoints (the public implementation, coeusguo/ceit): ``i2t``, LeFF blocks, ``lca``.

Its keys are ``i2t.backbone.{conv, bn}`` and ``i2t.proj`` (the stem), timm's ViT keys with
``blocks.N.leff.{conv1, bn1, conv2, bn2, conv3, bn3}`` for the feed-forward, ``lca.{norm1,
attn.qkv, attn.proj, norm2, feedforward.fc1, feedforward.fc2}`` and ``pos_layer_embed``. They
become ``downsamples.0.{conv, bn, proj}``, ``stages.0.blocks.N.mlp.*``, ``lca.{norm1, qkv, proj,
norm2, mlp.fc1, mlp.fc2}``; the rest is the :mod:`.vit` layout. Its forward pass is the paper's.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from .layout import Layout, Target, take, take_prefix
from .vit import STAGE, convert_vit, pos_embed_split

__all__ = ["CeiTLayout"]

LEFF_KEY = re.compile(r"blocks\.(\d+)\.leff\.")
LCA_PARTS = {"lca.attn.qkv.": "lca.qkv.", "lca.attn.proj.": "lca.proj.", "lca.feedforward.": "lca.mlp."}


class CeiTLayout(Layout):
    """CeiT as published in coeusguo/ceit."""

    name = "ceit"
    description = "CeiT: i2t.backbone, blocks.N.leff, lca"
    archs = ("ceit",)
    width_key = ("i2t.proj.weight", 0)

    def matches(self, keys: set[str]) -> bool:
        return "i2t.proj.weight" in keys and "pos_layer_embed" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for key in list(state):
            if (match := LEFF_KEY.match(key)) is not None:
                out[f"{STAGE}blocks.{match.group(1)}.mlp.{key[match.end() :]}"] = state.pop(key)
        take_prefix(state, out, "i2t.backbone.", "downsamples.0.")
        take_prefix(state, out, "i2t.proj.", "downsamples.0.proj.")
        for src, dst in LCA_PARTS.items():
            take_prefix(state, out, src, dst)
        take_prefix(state, out, "lca.", "lca.")
        take(state, out, "pos_layer_embed", "pos_layer_embed")
        return {**out, **convert_vit(state, target)}

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """img_size of the grid ``pos_embed`` was stored for (its side times the stem's stride)."""
        split = pos_embed_split(state, "pos_embed", 1) if "pos_embed" in state else None
        return {} if split is None else {"img_size": split[1] * cfg.stride}
