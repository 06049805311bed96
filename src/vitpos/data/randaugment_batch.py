"""One RandAugment layer on a whole uint8 batch, every image its own op, magnitude and sign.

The 15 ops fall into five families, each run once per layer on the images that drew one of its
ops, with their magnitudes as tensors: invert, posterize, solarize and solarize-add as exact
integer arithmetic on the grey levels (three passes, each image its own mask, addend and
threshold); brightness, autocontrast, equalize and contrast (whose maps depend on the image's
statistics) as one 256-entry lookup table per image and channel and a single gather; the five
geometric ops as one affine warp with a matrix per image; colour and sharpness as one blend each.
Between ops images stay uint8, as Pillow keeps them in timm. Each op's result equals its per-image
definition in :mod:`.randaugment_ops` rounded to whole grey levels (tests compare them image by
image).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .randaugment_ops import (
    GEOMETRIC,
    OPS,
    OpSettings,
    affine_matrices,
    blend,
    factor,
    geometric_amount,
    grey_mean,
    posterize_mask,
    solarize_add_amount,
    solarize_threshold,
    stretch,
    to_levels_,
    warp_,
)

__all__ = ["NAMES", "LOOKUP", "apply_layer_", "lookup_tables", "equalize_tables"]

NAMES = tuple(OPS)
"""The ops in the order a draw indexes them."""
INTEGER = ("Invert", "Posterize", "Solarize", "SolarizeAdd")
"""Ops that are exact integer arithmetic on grey levels: one pass each, every image its own parameters."""
LOOKUP = ("AutoContrast", "Equalize", "Contrast", "Brightness")
"""Ops that are a table per image and channel (Brightness: the op applied to every grey level)."""

Family = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, OpSettings], torch.Tensor]


def _float(x: torch.Tensor) -> torch.Tensor:
    return torch.div(x, 255.0)  # uint8 -> float32 in [0, 1] in one pass


def equalize_tables(x: torch.Tensor) -> torch.Tensor:
    """Pillow's ``equalize`` tables of uint8 images (B, C, H, W): (B, C, 256) uint8, from each channel's histogram."""
    b, c = x.shape[:2]
    n, dev = b * c, x.device
    index = x.reshape(n, -1).long() + torch.arange(n, device=dev).view(-1, 1) * 256
    hist = torch.bincount(index.view(-1), minlength=n * 256).view(n, 256)
    levels = torch.arange(256, device=dev)
    last = torch.where(hist > 0, levels, 0).amax(1, keepdim=True)  # the brightest level present
    step = (hist.sum(1, keepdim=True) - hist.gather(1, last)) // 255
    below = hist.cumsum(1) - hist
    table = ((below + step // 2) // step.clamp_min(1)).clamp_(max=255)
    return torch.where(step == 0, levels, table).to(torch.uint8).view(b, c, 256)


def _table(name: str, x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """The (B, C, 256) uint8 tables of lookup op ``name`` for uint8 images ``x``."""
    if name == "Equalize":
        return equalize_tables(x)
    b, c = x.shape[:2]
    ramp = _float(torch.arange(256, device=x.device, dtype=torch.uint8)).view(1, 1, 1, 256).expand(b, c, 1, 256)
    if name == "AutoContrast":
        lo, hi = x.amin(dim=(-2, -1), keepdim=True), x.amax(dim=(-2, -1), keepdim=True)
        out = stretch(ramp, _float(lo), _float(hi))
    elif name == "Contrast":
        out = blend(grey_mean(_float(x)).expand_as(ramp), ramp, factor(level, sign, ra))
    else:  # Brightness
        out = blend(torch.zeros_like(ramp), ramp, factor(level, sign, ra))
    return to_levels_(out).view(b, c, 256)


def lookup_tables(
    x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings
) -> torch.Tensor:
    """The (B, C, 256) uint8 table of each image of ``x``, whose op ``NAMES[op]`` is one of :data:`LOOKUP`."""
    tables = torch.empty(*x.shape[:2], 256, dtype=torch.uint8, device=x.device)
    for name in LOOKUP:  # tables are tiny: only the statistics read the images
        rows = (op == NAMES.index(name)).nonzero().squeeze(1)
        if rows.numel():
            tables[rows] = _table(name, x[rows], level[rows], sign[rows], ra)
    return tables


def _lookup(x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    tables = lookup_tables(x, op, level, sign, ra)
    return tables.gather(2, x.flatten(2).long()).view_as(x)


def _integer(
    x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings
) -> torch.Tensor:
    """Invert, Posterize, Solarize and SolarizeAdd in uint8, each image its own (identity for the others)."""

    def drew(name: str) -> torch.Tensor:
        return op == NAMES.index(name)

    mask = torch.where(drew("Posterize"), posterize_mask(level, ra), 255).to(torch.uint8)
    add = torch.where(drew("SolarizeAdd"), solarize_add_amount(level), 0).to(torch.uint8)
    threshold = torch.where(drew("Solarize"), solarize_threshold(level, ra), 256)
    threshold = torch.where(drew("Invert"), 0, threshold).to(torch.int16)  # inverting: solarizing from 0
    # arithmetic rather than torch.where, which is several times slower on uint8
    out = x & mask.view(-1, 1, 1, 1)
    out += (out < 128).to(torch.uint8).mul_(add.view(-1, 1, 1, 1))  # at most 127 + 110: no overflow
    return out.bitwise_xor_((out >= threshold.view(-1, 1, 1, 1)).to(torch.uint8).mul_(255))  # 255 - v = v ^ 255


def _one(name: str) -> Family:
    def run(x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
        return to_levels_(OPS[name](_float(x), level, sign, ra))

    return run


_KIND = torch.tensor([GEOMETRIC.index(n) if n in GEOMETRIC else -1 for n in NAMES])


def _geometric(
    x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings
) -> torch.Tensor:
    kind = _KIND.to(op.device)[op]
    inverse = affine_matrices(kind, geometric_amount(kind, level, sign), *x.shape[-2:])
    return to_levels_(warp_(_float(x), inverse, ra))


_FAMILIES: tuple[tuple[tuple[str, ...], Family], ...] = (
    (LOOKUP, _lookup),
    (INTEGER, _integer),
    (GEOMETRIC, _geometric),
    (("Color",), _one("Color")),
    (("Sharpness",), _one("Sharpness")),
)
_FAMILY = torch.tensor([next(i for i, (names, _) in enumerate(_FAMILIES) if n in names) for n in NAMES])
assert sorted(n for names, _ in _FAMILIES for n in names) == sorted(NAMES), "every op belongs to one family"


def apply_layer_(x: torch.Tensor, op: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> None:
    """In place on uint8 images ``x`` (B, C, H, W): image i gets op ``NAMES[op[i]]`` (none where ``op[i] < 0``)
    at magnitude ``level[i]`` and sign ``sign[i]``."""
    family = _FAMILY.to(op.device)[op.clamp_min(0)].masked_fill_(op < 0, -1)
    for index, (_, run) in enumerate(_FAMILIES):
        rows = (family == index).nonzero().squeeze(1)
        if rows.numel():  # the families' images are disjoint, so each reads its images before any is written
            x[rows] = run(x.index_select(0, rows), op[rows], level[rows], sign[rows], ra)
