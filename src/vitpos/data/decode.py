"""Image decoding with Pillow: open lazily, then decode only what a crop needs (JPEG draft mode).

A JPEG can be decoded at 1/2, 1/4 or 1/8 of its size for a fraction of the work (the DCT is
truncated). :func:`crop_resize` asks for the smallest such scale at which the requested region
still has at least the output's pixels, then resamples that region to the output size with
Pillow's antialiased resize. Other formats are decoded in full.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

__all__ = ["READ_ERRORS", "RESAMPLING", "Box", "open_image", "crop_resize", "to_tensor", "unreadable"]

READ_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError)
"""What Pillow raises for a file it cannot decode."""

RESAMPLING = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}
"""Interpolation names the training options accept, as Pillow's filters."""

Box = tuple[float, float, float, float]
"""A region (left, top, width, height) in pixels of the image at its full size."""


def unreadable(name: str | Path, err: BaseException) -> ValueError:
    """The error for an image that cannot be decoded, naming it and the fix."""
    return ValueError(f"cannot read image {name} ({err}); remove or replace the file")


def open_image(source: Path | bytes, name: str | Path | None = None) -> Image.Image:
    """The image in a file or in encoded bytes, opened lazily: its size is known, its pixels not yet decoded."""
    name = name if name is not None else source if isinstance(source, Path) else "<bytes>"
    try:
        return Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    except READ_ERRORS as err:
        raise unreadable(name, err) from None


def crop_resize(img: Image.Image, box: Box, size: tuple[int, int], mode: str, resample: str = "bicubic") -> Image.Image:
    """Region ``box`` of the lazily opened ``img`` resampled to ``size`` (H, W), in Pillow ``mode`` (RGB or L)."""
    full_w, full_h = img.size
    left, top, width, height = box
    out_h, out_w = size
    # a JPEG not decoded yet is decoded at the smallest scale that keeps the region's detail; others ignore it
    img.draft(mode, (math.ceil(full_w * out_w / width), math.ceil(full_h * out_h / height)))
    sx, sy = img.width / full_w, img.height / full_h
    try:
        img = img.convert(mode)
    except READ_ERRORS as err:
        raise unreadable(getattr(img, "filename", None) or "<bytes>", err) from None
    region = (left * sx, top * sy, (left + width) * sx, (top + height) * sy)
    return img.resize((out_w, out_h), RESAMPLING[resample], box=region)


def to_tensor(img: Image.Image) -> torch.Tensor:
    """A Pillow image as uint8 (C, H, W)."""
    pixels = np.asarray(img, dtype=np.uint8)
    pixels = pixels[..., None] if pixels.ndim == 2 else pixels
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)
