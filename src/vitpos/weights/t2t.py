"""T2T-ViT checkpoints (yitu-opensource/T2T-ViT): ``tokens_to_token`` and a timm-style backbone.

The stem's keys are ``tokens_to_token.{attention1, attention2, project}``: performer layers hold
``kqv``, ``proj``, ``norm1``, ``norm2``, ``mlp.0``, ``mlp.2`` and their random features ``w``,
transformer layers ``norm1``, ``attn.qkv``, ``attn.proj``, ``norm2``, ``mlp.fc1``, ``mlp.fc2``.
They become ``downsamples.0.*`` (``w`` becomes ``features``); the backbone is the :mod:`.vit`
layout. ``pos_embed`` is the fixed sinusoidal table, recomputed by the model and not loaded; the
authors count the class token as its position 0, so loading selects ``sincos1d:prefix``. A
variant no preset fits (T2T-ViT-14, T2T-ViT_t-14 ...) is read from the file's shapes: the stem's
layers (``kqv``: performer; ``attn.qkv``: transformer) and width, then depth, width and MLP ratio,
with the authors' 64 channels a head assumed (:data:`~.layout.HEAD_WIDTH`: the shapes do not show it).
The stored table's length gives the image size it was trained at.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from ..spec import SlotSpec
from .layout import HEAD_WIDTH, HEAD_WIDTH_NOTE, Layout, Target, shapes_of, take_prefix
from .vit import convert_vit, pos_embed_split

__all__ = ["T2TViTLayout"]

STEM = "tokens_to_token."
BLOCK = re.compile(r"blocks\.(\d+)\.")
STEM_KINDS = {"kqv.weight": "performer", "attn.qkv.weight": "transformer"}
"""The stem layer's key that tells its kind."""


class T2TViTLayout(Layout):
    """The T2T-ViT authors' models."""

    name = "t2t"
    description = "T2T-ViT: tokens_to_token.attention1, blocks.N.attn.qkv"
    archs = ("t2t",)
    width_key = ("tokens_to_token.project.weight", 0)
    assumed = (("num_heads", f"{HEAD_WIDTH_NOTE}; T2T-ViT-14-resnext has 32"),)

    def matches(self, keys: set[str]) -> bool:
        return "tokens_to_token.project.weight" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for layer in ("attention1", "attention2"):
            key = f"{STEM}{layer}.w"
            if key in state:
                out[f"downsamples.0.{layer}.features"] = state.pop(key)
        take_prefix(state, out, STEM, "downsamples.0.")
        state.pop("pos_embed", None)  # the fixed table the model computes
        return {**out, **convert_vit(state, target)}

    def released_config(self, cfg: HostConfig) -> HostConfig:
        absolute = SlotSpec.parse(cfg.position.absolute)
        if absolute.name == "sincos1d" and "prefix" not in absolute.flags:
            return cfg.replace(absolute="sincos1d:prefix")
        return cfg

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """img_size of the grid the stored table (class token first) was computed for."""
        split = pos_embed_split(state, "pos_embed", 1) if "pos_embed" in state else None
        return {} if split is None else {"img_size": split[1] * cfg.stride}

    def stored_shapes(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        project, fc1 = state.get(f"{STEM}project.weight"), state.get("blocks.0.mlp.fc1.weight")
        kinds = [kind for key, kind in STEM_KINDS.items() if f"{STEM}attention1.{key}" in state]
        if project is None or fc1 is None or len(kinds) != 1:
            return {}
        dim = project.shape[0]
        return {
            "t2t_layer": kinds[0],
            "token_dim": project.shape[1] // 9,  # the last soft split: 3 x 3 tokens of the stem's width
            "embed_dim": dim,
            "num_heads": max(1, dim // HEAD_WIDTH),
            "depth": 1 + max(int(m[1]) for k in state if (m := BLOCK.match(k)) is not None),
            "mlp_ratio": fc1.shape[0] / dim,
        }

    def shape_summary(self, state: dict[str, torch.Tensor]) -> str:
        stem = [f"{STEM}attention1.{key}" for key in STEM_KINDS]
        keys = [*stem, f"{STEM}project.weight", "blocks.0.mlp.fc1.weight"]
        depth = len({m[1] for k in state if (m := BLOCK.match(k)) is not None})
        return f"{shapes_of(state, keys)}, {depth} blocks"
