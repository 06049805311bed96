"""Object targets in a batch: one padded tensor (B, M, 5) of [class, cx, cy, w, h] rows.

Boxes are normalised to [0, 1] by the image's width and height, so they stay true when an image
is resized; rows with class -1 are padding. A fixed-shape tensor moves through the engine's
batching, devices and processes exactly as class labels do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["ObjectTargets", "pad_objects", "unpad_objects", "PADDING"]

PADDING = -1
"""The class of padding rows."""


@dataclass(frozen=True)
class ObjectTargets:
    """The objects of one image: classes (n,) int64 and normalised (cx, cy, w, h) boxes (n, 4)."""

    labels: torch.Tensor
    boxes: torch.Tensor


def pad_objects(objects: list[ObjectTargets], slots: int | None = None) -> torch.Tensor:  # B, M, 5
    """Stack per-image objects into a (B, M, 5) float tensor, padding rows with class -1."""
    slots = max([len(o.labels) for o in objects] + [1]) if slots is None else slots
    out = torch.full((len(objects), slots, 5), float(PADDING))
    out[..., 1:] = 0.0
    for i, o in enumerate(objects):
        n = len(o.labels)
        if n > slots:
            raise ValueError(f"image {i} has {n} objects, more than the {slots} rows of the batch")
        out[i, :n, 0] = o.labels.float()
        out[i, :n, 1:] = o.boxes.float()
    return out


def unpad_objects(targets: torch.Tensor) -> list[ObjectTargets]:
    """The inverse of :func:`pad_objects`: one :class:`ObjectTargets` per image."""
    if targets.ndim != 3 or targets.shape[-1] != 5:
        raise ValueError(
            f"detection targets are (B, M, 5) rows of [class, cx, cy, w, h], got shape {tuple(targets.shape)}"
        )
    out = []
    for rows in targets:
        keep = rows[:, 0] != PADDING
        out.append(ObjectTargets(rows[keep, 0].long(), rows[keep, 1:]))
    return out
