"""Compact Transformers' checkpoints (SHI-Labs/Compact-Transformers: ViT-Lite, CVT, CCT).

Their models hold ``tokenizer.conv_layers.I.0`` (the stem convolution of block I) and a
``classifier`` with ``class_emb`` (ViT-Lite), ``positional_emb`` (1, [1 +] N, D),
``blocks.N.{pre_norm, self_attn.qkv, self_attn.proj, norm1, linear1, linear2}``, ``norm``,
``attention_pool`` (CVT, CCT) and ``fc``. In vitpos's compact host they become
``downsamples.0.proj`` (patch tokenizer) or ``downsamples.0.convs.I`` (convolutional),
``cls_token``, ``stages.0.absolute.{prefix_table, table}``, ``stages.0.blocks.N.{norm1,
attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``, ``norm``, ``attention_pool.score`` and
``head``. Their forward pass is the paper's, so loading selects no option. A variant no preset
fits (CCT-14/7x2, CCT-7/7x2 on Flowers-102) is read from the file's shapes: the stem (patch or
convolutional, its kernel, layers and channels), depth, width, MLP ratio and head, with the
authors' 64 channels a head assumed (:data:`~.layout.HEAD_WIDTH`).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from .layout import HEAD_WIDTH, HEAD_WIDTH_NOTE, Layout, Target, shapes_of, take, take_prefix
from .vit import STAGE, fit_position_table, pos_embed_split

__all__ = ["CompactTransformers"]

BLOCK_KEY = re.compile(r"classifier\.blocks\.(\d+)\.(pre_norm|self_attn\.qkv|self_attn\.proj|norm1|linear1|linear2)\.")
BLOCK_PARTS = {
    "pre_norm": "norm1",
    "self_attn.qkv": "attn.qkv",
    "self_attn.proj": "attn.proj",
    "norm1": "norm2",
    "linear1": "mlp.fc1",
    "linear2": "mlp.fc2",
}
"""The authors' names inside an encoder layer, and vitpos's."""
CONV_KEY = re.compile(r"tokenizer\.conv_layers\.(\d+)\.0\.(weight|bias)")
POSITION_KEY = "classifier.positional_emb"


class CompactTransformers(Layout):
    """SHI-Labs' Compact Transformers (ViT-Lite, CVT, CCT)."""

    name = "compact"
    description = "Compact Transformers (ViT-Lite, CVT, CCT): tokenizer.conv_layers, classifier.blocks.N"
    archs = ("compact",)
    assumed = (("num_heads", HEAD_WIDTH_NOTE),)

    def matches(self, keys: set[str]) -> bool:
        return "classifier.blocks.0.self_attn.qkv.weight" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        conv_tokenizer = getattr(getattr(target.model, "cfg", None), "tokenizer", "patch") == "conv"
        for key in list(state):
            if (match := CONV_KEY.fullmatch(key)) is not None:
                layer, kind = match.groups()
                out[f"downsamples.0.convs.{layer}.{kind}" if conv_tokenizer else f"downsamples.0.proj.{kind}"] = (
                    state.pop(key)
                )
            elif (match := BLOCK_KEY.match(key)) is not None:
                block, part = match.groups()
                out[f"{STAGE}blocks.{block}.{BLOCK_PARTS[part]}.{key[match.end() :]}"] = state.pop(key)
        fit_position_table(state, out, target, POSITION_KEY, STAGE + "absolute", int("classifier.class_emb" in state))
        take(state, out, "classifier.class_emb", "cls_token")
        take_prefix(state, out, "classifier.norm.", "norm.")
        take_prefix(state, out, "classifier.attention_pool.", "attention_pool.score.")
        take_prefix(state, out, "classifier.fc.", "head.")
        return out

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """img_size of the grid ``positional_emb`` was stored for (its side times the stem's stride)."""
        if POSITION_KEY not in state:
            return {}
        split = pos_embed_split(state, POSITION_KEY, int("classifier.class_emb" in state))
        return {} if split is None else {"img_size": split[1] * cfg.stride}

    def stored_shapes(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        qkv = state.get("classifier.blocks.0.self_attn.qkv.weight")
        fc1 = state.get("classifier.blocks.0.linear1.weight")
        convs = sorted(int(m[1]) for k in state if (m := CONV_KEY.fullmatch(k)) is not None and m[2] == "weight")
        if qkv is None or fc1 is None or not convs:
            return {}
        dim = qkv.shape[1]
        first = state["tokenizer.conv_layers.0.0.weight"]
        fields: dict[str, Any] = {
            "embed_dim": dim,
            "num_heads": max(1, dim // HEAD_WIDTH),
            "depth": 1 + max(int(m[1]) for k in state if (m := BLOCK_KEY.match(k)) is not None),
            "mlp_ratio": fc1.shape[0] / dim,
            "head": "cls" if "classifier.class_emb" in state else "seq",
        }
        if "tokenizer.conv_layers.0.0.bias" in state:  # ViT-Lite, CVT: one strided convolution with a bias
            return fields | {"tokenizer": "patch", "patch_size": first.shape[-1]}
        channels = {"conv_channels": first.shape[0]} if len(convs) > 1 else {}
        return fields | {"tokenizer": "conv", "conv_layers": len(convs), "conv_kernel": first.shape[-1], **channels}

    def shape_summary(self, state: dict[str, torch.Tensor]) -> str:
        keys = [k for k in state if CONV_KEY.fullmatch(k)] + [POSITION_KEY, "classifier.blocks.0.linear1.weight"]
        depth = len({m[1] for k in state if (m := BLOCK_KEY.match(k)) is not None})
        return f"{shapes_of(state, keys)}, {depth} blocks"
