"""PVT v1 as released by its authors (whai362/PVT, classification).

Stage S (1-based) has ``patch_embed{S}.{proj, norm}``, ``pos_embed{S}`` (1, N_S, C_S; the last
stage has a first row for the class token) and blocks ``block{S}.M.{norm1, attn.q, attn.kv,
attn.sr, attn.norm, attn.proj, norm2, mlp.fc1, mlp.fc2}``; then ``cls_token``, ``norm`` and
``head``. vitpos's spatial-reduction attention keeps q and kv as the two parts of one ``qkv``
layer. A position table stored for another grid is resampled bicubically, as the model does at
run time (PVT's own code interpolates bilinearly at other sizes).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from .layout import Layout, Target, take, take_prefix
from .vit import fit_position_table, pos_embed_split

__all__ = ["PVTv1"]

BLOCK_KEY = re.compile(
    r"block(\d+)\.(\d+)\.(norm1|norm2|attn\.proj|attn\.sr|attn\.norm|mlp\.fc1|mlp\.fc2)\.(weight|bias)"
)
QKV_KEY = re.compile(r"block(\d+)\.(\d+)\.attn\.q\.(weight|bias)")


def _stages(state: dict[str, torch.Tensor]) -> list[int]:
    return sorted(int(k[len("pos_embed") :]) for k in state if re.fullmatch(r"pos_embed\d+", k))


class PVTv1(Layout):
    """PVT v1 classification models."""

    name = "pvt"
    description = "PVT v1: patch_embed1..4, pos_embed1..4, block1..4.M.attn.{q,kv,sr}"
    archs = ("pvt",)
    resize = "model"

    def matches(self, keys: set[str]) -> bool:
        return "patch_embed1.proj.weight" in keys and "pos_embed1" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        stages = _stages(state)
        for s in stages:
            prefix = int(s == stages[-1] and "cls_token" in state)
            fit_position_table(state, out, target, f"pos_embed{s}", f"stages.{s - 1}.absolute", prefix)
            take_prefix(state, out, f"patch_embed{s}.", f"downsamples.{s - 1}.")
        for key in list(state):
            if (match := BLOCK_KEY.fullmatch(key)) is not None:
                stage, block, part, kind = match.groups()
                out[f"stages.{int(stage) - 1}.blocks.{block}.{part}.{kind}"] = state.pop(key)
            elif (match := QKV_KEY.fullmatch(key)) is not None and key.replace(".q.", ".kv.") in state:
                stage, block, kind = match.groups()
                kv = state.pop(key.replace(".q.", ".kv."))
                out[f"stages.{int(stage) - 1}.blocks.{block}.attn.qkv.{kind}"] = torch.cat([state.pop(key), kv])
        take(state, out, "cls_token", "cls_token")
        take_prefix(state, out, "norm.", "norm.")
        take_prefix(state, out, "head.", "head.")
        return out

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        split = pos_embed_split(state, "pos_embed1", 0) if "pos_embed1" in state else None
        return {} if split is None else {"img_size": split[1] * cfg.patch_size}
