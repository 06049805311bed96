"""vitpos's own checkpoints (``vitpos convert`` output, run folders, ``model.state_dict()``): loaded as
they are, with the plain ViT's earlier parameter names renamed (:func:`~vitpos.models.vit.upgrade_state_dict`)."""

from __future__ import annotations

import re

import torch

from ..models.vit import upgrade_state_dict
from .layout import Layout, Target

__all__ = ["Native"]

NATIVE_PREFIXES = ("absolute.", "join.", "conditional.")
"""The earlier ViT's slots at the top level."""
NATIVE_PART = re.compile(r"(?:^|\.)(?:stages|downsamples)\.\d+\.|\.attn\.relative\.")
"""Names only vitpos writes: a host's stages wherever it sits (a segmenter's ``backbone.``, DETR's ``encoder.``)."""


class Native(Layout):
    """A vitpos state dict; names already match the model."""

    name = "vitpos"
    description = "vitpos state dicts and checkpoints"
    archs = ()  # any vitpos model
    resize = "model"

    def matches(self, keys: set[str]) -> bool:
        return any(k.startswith(NATIVE_PREFIXES) or NATIVE_PART.search(k) for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        own = set(target.model.state_dict())
        renamed = upgrade_state_dict({k: k for k in state})
        return {new: state.pop(old) for new, old in renamed.items() if new in own}
