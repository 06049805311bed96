"""T2T-ViT checkpoints (yitu-opensource/T2T-ViT): ``tokens_to_token`` and a timm-style backbone.

The stem's keys are ``tokens_to_token.{attention1, attention2, project}``: performer layers hold
``kqv``, ``proj``, ``norm1``, ``norm2``, ``mlp.0``, ``mlp.2`` and their random features ``w``,
transformer layers ``norm1``, ``attn.qkv``, ``attn.proj``, ``norm2``, ``mlp.fc1``, ``mlp.fc2``.
They become ``downsamples.0.*`` (``w`` becomes ``features``); the backbone is the :mod:`.vit`
layout. ``pos_embed`` is the fixed sinusoidal table, recomputed by the model and not loaded; the
authors count the class token as its position 0, so loading selects ``sincos1d:prefix``.
"""

from __future__ import annotations

import torch

from ..config import HostConfig
from ..spec import SlotSpec
from .layout import Layout, Target, take_prefix
from .vit import convert_vit

__all__ = ["T2TViTLayout"]

STEM = "tokens_to_token."


class T2TViTLayout(Layout):
    """The T2T-ViT authors' models."""

    name = "t2t"
    description = "T2T-ViT: tokens_to_token.attention1, blocks.N.attn.qkv"
    archs = ("t2t",)

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
