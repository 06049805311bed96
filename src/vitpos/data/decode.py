"""Image decoding with Pillow: open lazily, then decode only what a crop needs (JPEG draft mode).

A JPEG can be decoded at 1/2, 1/4 or 1/8 of its size for a fraction of the work (the DCT is
truncated). :func:`crop_resize` asks for the smallest such scale at which the requested region
still has at least the output's pixels, then resamples that region to the output size with
Pillow's antialiased resize. Other formats are decoded in full.

A 16-bit image is scaled to 8 bits (Pillow alone would clip it at 255); one of 32-bit integers
or floating point (a float TIFF), whose range the file does not state, is refused when it is
opened. An image whose header claims more pixels than :func:`pixel_limit` (Pillow's
``MAX_IMAGE_PIXELS``, about 89 million, unless ``VITPOS_MAX_IMAGE_PIXELS`` raises it) is refused
when it is opened, before any pixel is decoded: a few bytes can otherwise claim gigabytes (a
decompression bomb).
"""

from __future__ import annotations

import io
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from ..errors import ConfigError, VitposError

__all__ = [
    "READ_ERRORS",
    "RESAMPLING",
    "Box",
    "PIXEL_LIMIT_ENV",
    "pixel_limit",
    "open_image",
    "to_mode",
    "crop_resize",
    "to_tensor",
    "unreadable",
]

READ_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError)
"""What Pillow raises for a file it cannot decode."""

RESAMPLING = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}
"""Interpolation names the training options accept, as Pillow's filters."""

UNSCALED_MODES = {"I": "32-bit integer", "F": "floating-point"}
"""Pillow modes of images whose pixel range is not known from the file: refused when opened."""

Box = tuple[float, float, float, float]
"""A region (left, top, width, height) in pixels of the image at its full size."""

PIXEL_LIMIT_ENV = "VITPOS_MAX_IMAGE_PIXELS"
_PILLOW_LIMIT = Image.MAX_IMAGE_PIXELS or 89_478_485


def pixel_limit() -> int:
    """The most pixels an image may have: ``VITPOS_MAX_IMAGE_PIXELS`` if set, else Pillow's ``MAX_IMAGE_PIXELS``."""
    text = os.environ.get(PIXEL_LIMIT_ENV, "").strip()
    if not text:
        return _PILLOW_LIMIT
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise ConfigError(f"{PIXEL_LIMIT_ENV}={text[:40]!r} is not allowed: give a whole number of pixels > 0")
    return int(text)


def _too_large(name: str | Path, limit: int, size: str, what: str) -> VitposError:
    return VitposError(
        f"{what} {name} is {size}, more than the limit of {limit} pixels (Pillow's MAX_IMAGE_PIXELS, a guard against "
        f"decompression bombs); remove the file, or if it is a genuine image raise the limit with "
        f"{PIXEL_LIMIT_ENV}=N"
    )


def unreadable(name: str | Path, err: BaseException, what: str = "image") -> VitposError:
    """The error for an image (or mask) that cannot be decoded, naming it and the fix."""
    return VitposError(f"cannot read {what} {name} ({err}); remove or replace the file")


def open_image(source: Path | bytes, name: str | Path | None = None, what: str = "image") -> Image.Image:
    """The image in a file or in encoded bytes, opened lazily: its size is known, its pixels not yet decoded."""
    name = name if name is not None else source if isinstance(source, Path) else "<bytes>"
    limit = pixel_limit()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # refused below, with the file's name
            # Pillow refuses at twice its own limit: a raised limit must reach it too
            Image.MAX_IMAGE_PIXELS = max(limit, _PILLOW_LIMIT)
            img = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    except Image.DecompressionBombError as err:
        found = re.search(r"\((\d+) pixels\)", str(err))
        raise _too_large(name, limit, f"{found.group(1) if found else 'over twice that many'} pixels", what) from None
    except READ_ERRORS as err:
        raise unreadable(name, err, what) from None
    if img.width * img.height > limit:
        img.close()
        raise _too_large(name, limit, f"{img.width}x{img.height} pixels", what)
    if what == "image" and img.mode in UNSCALED_MODES:
        img.close()
        raise VitposError(
            f"{what} {name} holds {UNSCALED_MODES[img.mode]} pixels (Pillow mode {img.mode}), whose range vitpos "
            "cannot know (0-1, 0-255, 0-65535 ...); convert it to 8 or 16 bits a channel"
        )
    return img


def to_mode(img: Image.Image, mode: str) -> Image.Image:
    """``img`` in Pillow ``mode`` (RGB or L); 16-bit pixels scaled to 8 bits (Pillow would clip them at 255)."""
    if img.mode.startswith("I;16"):
        pixels = np.asarray(img, dtype=np.float32)
        img = Image.fromarray(np.round(pixels / 257).astype(np.uint8))
    return img.convert(mode)


def crop_resize(img: Image.Image, box: Box, size: tuple[int, int], mode: str, resample: str = "bicubic") -> Image.Image:
    """Region ``box`` of the lazily opened ``img`` resampled to ``size`` (H, W), in Pillow ``mode`` (RGB or L)."""
    full_w, full_h = img.size
    left, top, width, height = box
    out_h, out_w = size
    # a JPEG not decoded yet is decoded at the smallest scale that keeps the region's detail; others ignore it
    img.draft(mode, (math.ceil(full_w * out_w / width), math.ceil(full_h * out_h / height)))
    sx, sy = img.width / full_w, img.height / full_h
    try:
        img = to_mode(img, mode)
    except READ_ERRORS as err:
        raise unreadable(getattr(img, "filename", None) or "<bytes>", err) from None
    region = (left * sx, top * sy, (left + width) * sx, (top + height) * sy)
    return img.resize((out_w, out_h), RESAMPLING[resample], box=region)


def to_tensor(img: Image.Image) -> torch.Tensor:
    """A Pillow image as uint8 (C, H, W)."""
    pixels = np.asarray(img, dtype=np.uint8)
    pixels = pixels[..., None] if pixels.ndim == 2 else pixels
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)
