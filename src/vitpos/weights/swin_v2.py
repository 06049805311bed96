"""Swin V2 checkpoints (Liu et al., CVPR 2022): Microsoft's release and timm's ``swinv2_*``.

Both keep Swin's names (:mod:`.swin`) for the stem, the norms, the projections, the MLP and the
classifier, and add per block ``attn.logit_scale`` (heads, 1, 1), ``attn.q_bias`` and
``attn.v_bias`` (the keys have no bias, ``attn.qkv`` no bias of its own) and the continuous bias's
network ``attn.cpb_mlp.0`` (512 x 2, with bias) and ``attn.cpb_mlp.2`` (heads x 512). Patch
merging (``layers.S.downsample``: ``reduction``, then ``norm``) ends stage S in Microsoft's code
and starts it in timm's, as in Swin V1. vitpos's model is a Swin host with ``swin_v2=True`` and
``relative='cpb'``: the network becomes ``attn.relative.mlp``.

Microsoft's files also hold the buffers ``relative_coords_table`` (the network's inputs),
``relative_position_index`` and ``attn_mask``; timm's do not. They are not loaded, but the
coordinate table is checked against the model's: it shows the window each stage ran with and the
window its offsets were normalised by (``pretrained_window_size``), which the weights' shapes do not.
A file whose table differs is refused with the ``window_size`` and ``cpb:pretrained=`` that
reproduce it. A timm file holds no table, so its window is the model's (the presets name it).
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

from ..config import HostConfig
from ..encodings.relative.cpb import SPAN, log_spaced_offsets
from ..errors import CheckpointError
from .layout import Target
from .swin import MicrosoftSwin
from .vit import submodule

__all__ = ["MicrosoftSwinV2", "TimmSwinV2"]

ATTENTION_KEY = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.attn\.(logit_scale|q_bias|v_bias)")
NETWORK_KEY = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.attn\.cpb_mlp\.([02])\.(weight|bias)")
COORDS_KEY = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.attn\.relative_coords_table")
FIRST_COORDS = "layers.0.blocks.0.attn.relative_coords_table"
COORDS_TOLERANCE = 1e-5
"""The stored table is float32: entries within this of the model's (float64) are the same offsets."""


class MicrosoftSwinV2(MicrosoftSwin):
    """microsoft/Swin-Transformer's Swin V2 (and timm < 0.9): patch merging at the end of each stage."""

    name = "swinv2"
    description = "Microsoft's Swin V2: layers.S.blocks.M.attn.cpb_mlp, layers.S.downsample ending stage S"

    marker = "layers.0.blocks.0.attn.cpb_mlp.0.weight"

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        coordinates: dict[str, torch.Tensor] = {}
        for key in list(state):
            if (match := ATTENTION_KEY.fullmatch(key)) is not None:
                stage, block, name = match.groups()
                out[f"stages.{stage}.blocks.{block}.attn.{name}"] = state.pop(key)
            elif (match := NETWORK_KEY.fullmatch(key)) is not None:
                stage, block, layer, kind = match.groups()
                out[f"{_encoding_path(target.model, stage, block)}.mlp.{layer}.{kind}"] = state.pop(key)
            elif COORDS_KEY.fullmatch(key):
                coordinates[key] = state.pop(key)
        _check_coordinates(target, coordinates)
        return {**out, **super().convert(state, target)}

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        table = state.get(FIRST_COORDS)
        return {} if table is None else {"window_size": (table.shape[1] + 1) // 2}

    def hint(self, unmapped: list[str]) -> str:
        if any(".cpb_mlp." in k or k.endswith(("q_bias", "logit_scale")) for k in unmapped):
            return (
                "This is a Swin V2 checkpoint: load it into a Swin V2 model (a swinv2_* preset, see `vitpos models "
                "swinv2`, or swin_v2=True with relative='cpb')"
            )
        return super().hint(unmapped)


class TimmSwinV2(MicrosoftSwinV2):
    """timm >= 0.9's ``swinv2_*``: patch merging at the start of stage S, classifier ``head.fc``."""

    name = "timm-swinv2"
    description = "timm's Swin V2: layers.S.blocks.M.attn.cpb_mlp, layers.S.downsample starting stage S, head.fc"
    downsample_shift = 0


def _encoding_path(model: torch.nn.Module, stage: str, block: str) -> str:
    """Where block ``block`` of ``stage`` keeps its relative encoding (under a LaPE join: its ``encoding``)."""
    path = f"stages.{stage}.blocks.{block}.attn.relative"
    return f"{path}.encoding" if hasattr(submodule(model, path), "encoding") else path


def _check_coordinates(target: Target, tables: dict[str, torch.Tensor]) -> None:
    """Refuse a file whose network inputs (1, 2w-1, 2w-1, 2) show another window, or offsets normalised by
    another window, than the model's; name the ``window_size`` and ``cpb:pretrained=`` that reproduce every
    block where one setting does. A stage smaller than the window ran with a smaller one, as the model's
    stages do, so the image size the file was trained at does not matter."""
    window = getattr(getattr(target.model, "cfg", None), "window_size", None)
    encodings = [_cpb_of(target.model, key) for key in tables]
    if not tables or window is None or any(e is None for e in encodings):
        return  # no coordinates, or not a cpb model: its unmapped network keys are the error
    pretrained = {getattr(e, "pretrained") for e in encodings}  # noqa: B009  (cpb's option)
    if len(pretrained) == 1 and _reproduces(tables, window, next(iter(pretrained))):
        return
    stored_window = max(_side(t) for t in tables.values())
    normalising = sorted({n for t in tables.values() if (n := _normalising_window(t)) not in (None, _side(t))})
    found = f"checkpoint {target.source}: its coordinate tables show a {stored_window}-token window" + (
        f" with offsets normalised by window {', '.join(map(str, normalising))}" if normalising else ""
    )
    advice = next((p for p in (None, *normalising) if _reproduces(tables, stored_window, p)), "none")
    if advice == "none":
        raise CheckpointError(
            f"{found}, which no one window_size and cpb:pretrained= reproduce in every stage (Swin V2's per-stage "
            "pretrained_window_sizes); vitpos has no model for this file"
        )
    options = [f"window_size={stored_window}"] if stored_window != window else []
    if pretrained != {advice}:
        options.append("relative='cpb'" if advice is None else f"relative='cpb:pretrained={advice}'")
    setting = ", ".join(f"pretrained={p}" for p in sorted(pretrained, key=str))
    raise CheckpointError(
        f"{found}, not the model's (window {window}, cpb {setting}); build it with {' and '.join(options)}"
    )


def _side(stored: torch.Tensor) -> int:
    """The window side of a stored coordinate table (1, 2w-1, 2w-1, 2)."""
    return (stored.shape[1] + 1) // 2


def _cpb_of(model: torch.nn.Module, key: str) -> torch.nn.Module | None:
    """The cpb encoding of the block that ``key`` belongs to (``layers.S.blocks.M.attn...``), or None."""
    _, stage, _, block = key.split(".")[:4]
    encoding = submodule(model, _encoding_path(model, stage, block))
    return encoding if hasattr(encoding, "pretrained") else None


def _reproduces(tables: dict[str, torch.Tensor], window: int, pretrained: int | None) -> bool:
    """Whether a model of ``window`` and ``pretrained`` computes every stored table: the largest one is its
    window's, each one the inputs of its own (possibly shrunk) window."""
    if max(_side(t) for t in tables.values()) != window:
        return False
    spans = None if pretrained is None else (pretrained, pretrained)
    return all(
        torch.allclose(
            t.double().reshape(-1, 2), log_spaced_offsets((_side(t), _side(t)), spans), rtol=0, atol=COORDS_TOLERANCE
        )
        for t in tables.values()
    )


def _normalising_window(stored: torch.Tensor) -> int | None:
    """The window S whose sides normalised the stored offsets (entry (S_w - 1) -> 8), or None if it cannot tell."""
    side = _side(stored)
    if side < 2:
        return None
    value = float(stored[0, -1, side - 1, 0])  # the offset dy = side - 1, dx = 0
    scaled = 2.0 ** (value * math.log2(SPAN)) - 1.0  # 8 (side - 1) / (S - 1)
    return round(SPAN * (side - 1) / scaled) + 1 if scaled > 0 else None
