"""vitpos's own checkpoints (``vitpos convert`` output, run folders, ``model.state_dict()``): loaded as they are."""

from __future__ import annotations

import torch

from .layout import Layout, Target

__all__ = ["Native"]

NATIVE_PREFIXES = ("absolute.", "join.", "conditional.", "stages.", "downsamples.")


class Native(Layout):
    """A vitpos state dict; names already match the model."""

    name = "vitpos"
    description = "vitpos state dicts and checkpoints"
    archs = ("vit", "swin", "pvt")

    def matches(self, keys: set[str]) -> bool:
        return any(k.startswith(NATIVE_PREFIXES) or ".attn.relative." in k for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        own = set(target.model.state_dict())
        out = {k: state.pop(k) for k in list(state) if k in own}
        return out
