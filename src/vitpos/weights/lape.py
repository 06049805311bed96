"""The LaPE authors' ViT (Yu et al., ICCV 2023): a DeiT (:mod:`.vit` layout) whose blocks own a
``pe_norm`` LayerNorm of the position embedding.

Eq. 9 of the paper normalises the same pe in every layer: vitpos's ``lape`` join, the default.
The LaPE repository has released two forward passes with the same keys:

* its current code (``main.py --join-type LaPE``) chains the norms, pe_l = LN_pe,l(pe_{l-1})
  with pe_{-1} = ``pos_embed``: vitpos's ``lape:chained``;
* its first releases (commits 4747489 to 4a59418, ``main.py --pe_joining LaPE``) normalise the
  same ``pos_embed`` in every layer, as the paper: vitpos's ``lape``.

Either way pe_l joins block l's normalised attention input and the tokens enter block 0 without
it; the per-block norms become the rows of ``join.pe_norm``. A training checkpoint (``main.py``
saves its arguments as ``args``) names its form, and loading selects it (:func:`released_join`).
A bare state dict cannot tell them apart: loading selects the current code's ``lape:chained``;
``create_model(NAME, checkpoint=PATH, join="lape")`` loads one of the first releases.

``--join-type share`` adds ``pos_embed`` before every block but holds plain DeiT keys; its
``args`` name the join, and loading selects vitpos's ``shared`` join. A bare state dict of such a
model cannot be told from a DeiT's: build it with ``join="shared"``. ``--pe 1D_sin`` stores its
fixed table without the batch axis, (1 + N, D); it loads as the model's table (:mod:`.vit`).
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


RELEASED_JOINS = {
    ("pe_joining", "LaPE"): "lape",
    ("join_type", "LaPE"): "lape:chained",
    ("join_type", "share"): "shared",
}
"""The LaPE repository's stored arguments (name, value) that fix the join, and vitpos's join for each:
its first releases' ``--pe_joining``, its current ``--join-type``."""

BARE_FILE_NOTE = (
    "A bare LaPE state dict does not say which code wrote it: the LaPE repository's current code chains the "
    "norms (join='lape:chained', selected by default); for a file of its first releases (--pe_joining LaPE), which "
    "normalise the same pe in every layer, use vitpos.create_model(NAME, checkpoint=PATH, join='lape')"
)
"""What to do when a bare LaPE file meets a model built with another form of the join."""


def released_join(args: dict[str, Any]) -> str | None:
    """The join a LaPE training checkpoint's stored arguments name (None if they name none)."""
    for (name, value), join in RELEASED_JOINS.items():
        if args.get(name) == value:
            return join
    return None


class LapeViT(Layout):
    """DeiT with LaPE as released by its authors."""

    name = "lape"
    description = "LaPE authors' ViT: DeiT with blocks.N.pe_norm"
    archs = ("vit",)
    width_key = ("patch_embed.proj.weight", 0)

    def matches(self, keys: set[str]) -> bool:
        return any(PE_NORM_KEY.fullmatch(k) for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        return {**convert_pe_norms(state, target), **convert_vit(state, target)}

    def released_config(self, cfg: HostConfig) -> HostConfig:
        join = SlotSpec.parse(cfg.position.join)
        if join.name == "lape" and "chained" in join.flags:
            return cfg
        return cfg.replace(join="lape:chained")

    def options_note(self) -> str:
        return BARE_FILE_NOTE

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        return vit_geometry(state, cfg)
