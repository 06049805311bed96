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
        for key in list(state):
            if (match := ATTENTION_KEY.fullmatch(key)) is not None:
                stage, block, name = match.groups()
                out[f"stages.{stage}.blocks.{block}.attn.{name}"] = state.pop(key)
            elif (match := NETWORK_KEY.fullmatch(key)) is not None:
                stage, block, layer, kind = match.groups()
                out[f"{_encoding_path(target.model, stage, block)}.mlp.{layer}.{kind}"] = state.pop(key)
            elif (match := COORDS_KEY.fullmatch(key)) is not None:
                _check_coordinates(target, key, state.pop(key), int(match.group(1)), match.group(2))
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


def _check_coordinates(target: Target, key: str, stored: torch.Tensor, stage: int, block: str) -> None:
    """Refuse a file whose network inputs (1, 2h-1, 2w-1, 2) differ from those the model computes for ``stage``."""
    cfg = getattr(target.model, "cfg", None)
    window = getattr(cfg, "window_size", None)
    encoding = submodule(target.model, _encoding_path(target.model, str(stage), block))
    if cfg is None or window is None or not hasattr(encoding, "pretrained"):
        return  # not a cpb model: its unmapped network keys are the error
    h, w = (min(window, side) for side in cfg.stage_grid(stage))
    pretrained = getattr(encoding, "pretrained")  # noqa: B009  (the encoding's option, read from any cpb module)
    spans = None if pretrained is None else (pretrained, pretrained)
    ours = log_spaced_offsets((h, w), spans)
    theirs = stored.to(torch.float64).reshape(-1, 2)
    if theirs.shape == ours.shape and torch.allclose(theirs, ours, rtol=0, atol=COORDS_TOLERANCE):
        return
    side = (stored.shape[1] + 1) // 2
    stored_pretrained = _normalising_window(stored)
    options = [f"window_size={side}"] if side != min(window, *cfg.stage_grid(stage)) else []
    if stored_pretrained is not None and stored_pretrained != side:
        options.append(f"relative='cpb:pretrained={stored_pretrained}'")
    elif pretrained is not None:
        options.append("relative='cpb'")
    advice = f"build the model with {' and '.join(options)}" if options else "build a model with its window"
    raise CheckpointError(
        f"checkpoint {target.source}: {key} shows stage {stage} ran with a {side}x{side} window"
        + (f" and offsets normalised by window {stored_pretrained}" if stored_pretrained not in (None, side) else "")
        + f", the model's stage {stage} computes other inputs for its continuous bias ({h}x{w} window, "
        f"pretrained={pretrained}); {advice}"
    )


def _normalising_window(stored: torch.Tensor) -> int | None:
    """The window S whose sides normalised the stored offsets (entry (S_w - 1) -> 8), or None if it cannot tell."""
    side = (stored.shape[1] + 1) // 2
    if side < 2:
        return None
    value = float(stored[0, -1, side - 1, 0])  # the offset dy = side - 1, dx = 0
    scaled = 2.0 ** (value * math.log2(SPAN)) - 1.0  # 8 (side - 1) / (S - 1)
    return round(SPAN * (side - 1) / scaled) + 1 if scaled > 0 else None
