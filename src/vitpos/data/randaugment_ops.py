"""RandAugment's operations (timm's ``_RAND_TRANSFORMS``), each defined on float images in [0, 1].

Every op takes a batch (B, C, H, W), one magnitude ``level`` (0..10) and one sign (+-1) per image,
and computes Pillow's definition: kornia's ops (equalize, invert, solarize, grayscale) where they
compute it, Pillow's own blend formulas where kornia's differ (its brightness adds, its contrast does
not blend with the mean, its saturation works in HSV), Pillow's smoothing kernel for sharpness, and
one bicubic (or bilinear) ``grid_sample`` per affine warp. These are the per-image
definitions; :mod:`.randaugment_batch` applies them to a uint8 batch in a few batched kernels and
is tested equal to them image by image.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import kornia
import torch
import torch.nn.functional as F

__all__ = [
    "OpSettings",
    "OPS",
    "GEOMETRIC",
    "MAX_LEVEL",
    "apply_op",
    "affine_matrix",
    "affine_matrices",
    "warp_",
    "stretch",
]

MAX_LEVEL = 10.0
"""timm's magnitude scale: 10 is the strongest."""


class OpSettings(Protocol):
    """What an op reads of its RandAugment (:class:`~.randaugment.RandAugment` has these fields)."""

    @property
    def increasing(self) -> bool: ...

    @property
    def fill(self) -> tuple[float, ...]: ...

    @property
    def interpolation(self) -> str: ...


OpFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, OpSettings], torch.Tensor]


def _per_image(v: torch.Tensor) -> torch.Tensor:
    return v.view(-1, 1, 1, 1)


def grey(x: torch.Tensor) -> torch.Tensor:
    """Pillow's ``L`` conversion (ITU-R 601-2 luma) broadcast over the channels."""
    return kornia.color.rgb_to_grayscale(x).expand_as(x) if x.shape[1] == 3 else x


def blend(degenerate: torch.Tensor, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Pillow's ``ImageEnhance``: ``degenerate + factor * (x - degenerate)``, clipped."""
    return (degenerate + _per_image(factor) * (x - degenerate)).clamp(0, 1)


def stretch(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Pillow's ``autocontrast``: each channel's range [lo, hi] stretched to [0, 1] (kept where lo == hi)."""
    return torch.where(hi > lo, (x - lo) / (hi - lo).clamp_min(1e-12), x)


def grey_mean(x: torch.Tensor) -> torch.Tensor:
    """Pillow's ``Contrast`` degenerate: the mean whole grey level ``int(mean + 0.5)`` / 255, (B, 1, 1, 1)."""
    grey_levels = grey(x)[:, :1].mul(255).round()
    return grey_levels.mean(dim=(-3, -2, -1), keepdim=True).add(0.5).floor() / 255


def _auto_contrast(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return stretch(x, x.amin(dim=(-2, -1), keepdim=True), x.amax(dim=(-2, -1), keepdim=True))


def _equalize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return kornia.enhance.equalize(x)


def _invert(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return kornia.enhance.invert(x)


def posterize_bits(level: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """The high bits ``Posterize`` keeps per image: 4 down to 0 (increasing), else 4 up to 8."""
    bits = (level / MAX_LEVEL * 4).long()
    return 4 - bits if ra.increasing else bits + 4


def posterize_mask(level: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """The uint8 mask of the bits ``Posterize`` keeps per image."""
    return (256 - 2 ** (8 - posterize_bits(level, ra))).to(torch.uint8)


def solarize_threshold(level: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """The grey level from which ``Solarize`` inverts, per image (256: none)."""
    threshold = (level / MAX_LEVEL * 256).long()
    return 256 - threshold if ra.increasing else threshold


def solarize_add_amount(level: torch.Tensor) -> torch.Tensor:
    """The grey levels ``SolarizeAdd`` adds below level 128, per image."""
    return (level / MAX_LEVEL * 110).long()


def _posterize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    keep = (x.mul(255).round().to(torch.uint8) & _per_image(posterize_mask(level, ra))).float() / 255
    return torch.where(_per_image(posterize_bits(level, ra) >= 8), x, keep)


def _solarize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return kornia.enhance.solarize(x, solarize_threshold(level, ra).to(x.dtype) / 255)


def _solarize_add(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    add = solarize_add_amount(level).float() / 255
    return torch.where(x < 128 / 255, (x + _per_image(add)).clamp(max=1.0), x)


def factor(level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """Enhancement factor: 1 +- 0.9 * m / 10 (at least 0.1) increasing, else 0.1 + 1.8 * m / 10."""
    if ra.increasing:
        return (1.0 + sign * level / MAX_LEVEL * 0.9).clamp_min(0.1)
    return level / MAX_LEVEL * 1.8 + 0.1


def _color(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return blend(grey(x), x, factor(level, sign, ra))


def _contrast(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return blend(grey_mean(x).expand_as(x), x, factor(level, sign, ra))


def _brightness(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    return blend(torch.zeros_like(x), x, factor(level, sign, ra))


def _sharpness(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """Pillow's ``Sharpness``: blend with the image smoothed by (1 1 1 / 1 5 1 / 1 1 1) / 13, border pixels kept."""
    h, w = x.shape[-2:]
    rows = x[..., :, :-2] + x[..., :, 1:-1] + x[..., :, 2:]  # horizontal sums of three, (B, C, H, W - 2)
    box = rows[..., :-2, :] + rows[..., 1:-1, :] + rows[..., 2:, :]
    smooth = x.clone()
    smooth[..., 1 : h - 1, 1 : w - 1] = (box + 4 * x[..., 1:-1, 1:-1]) / 13
    return blend(smooth, x, factor(level, sign, ra))


GEOMETRIC = ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
"""The ops that move pixels: one affine warp each."""
_GEOMETRIC_RANGE = (30.0, 0.3, 0.3, 0.45, 0.45)
"""timm's amount at magnitude 10 per :data:`GEOMETRIC` op (degrees, shear factor, fraction of the image)."""


def affine_matrices(kind: torch.Tensor, amount: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pillow's inverse maps (output pixel corner -> input), (B, 3, 3): op ``GEOMETRIC[kind]`` by ``amount``."""
    b = amount.shape[0]
    m = torch.eye(3, dtype=torch.float64, device=amount.device).repeat(b, 1, 1)
    amount, zero = amount.double(), torch.zeros((), dtype=torch.float64, device=amount.device)
    rotate, shear_x, shear_y = kind == 0, kind == 1, kind == 2
    a = -torch.deg2rad(amount)  # Image.rotate: counter-clockwise about the centre
    cos, sin = a.cos(), a.sin()
    cx, cy = width / 2.0, height / 2.0
    m[:, 0, 0] = torch.where(rotate, cos, m[:, 0, 0])
    m[:, 1, 1] = torch.where(rotate, cos, m[:, 1, 1])
    m[:, 0, 1] = torch.where(rotate, sin, torch.where(shear_x, amount, zero))
    m[:, 1, 0] = torch.where(rotate, -sin, torch.where(shear_y, amount, zero))
    m[:, 0, 2] = torch.where(rotate, cos * -cx + sin * -cy + cx, torch.where(kind == 3, amount * width, zero))
    m[:, 1, 2] = torch.where(rotate, -sin * -cx + cos * -cy + cy, torch.where(kind == 4, amount * height, zero))
    return m


def affine_matrix(name: str, amount: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pillow's inverse map (output pixel corner -> input) of op ``name`` per image, (B, 3, 3)."""
    if name not in GEOMETRIC:
        raise ValueError(f"{name} is not a geometric op; geometric ops: {', '.join(GEOMETRIC)}")
    kind = torch.full(amount.shape, GEOMETRIC.index(name), device=amount.device)
    return affine_matrices(kind, amount, height, width)


def geometric_amount(kind: torch.Tensor, level: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """Each image's signed amount of op ``GEOMETRIC[kind]`` at magnitude ``level``."""
    top = torch.tensor(_GEOMETRIC_RANGE, device=level.device)[kind]
    return sign * level / MAX_LEVEL * top


def warp_(x: torch.Tensor, inverse: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """``x`` resampled through Pillow-style inverse maps (B, 3, 3); outside the image: ``ra.fill``. Overwrites
    ``x`` (scratch space: the batched path saves a copy of the batch this way)."""
    h, w = x.shape[-2:]
    # output pixel index -> input pixel index (pixel centres, where Pillow's maps take corners) ...
    centre = inverse.clone()
    centre[:, :2, 2] += 0.5 * (inverse[:, :2, 0] + inverse[:, :2, 1] - 1)
    # ... -> grid_sample's coordinates (-1 and 1 at the centres of the first and last pixels)
    centre[:, 0] *= 2 / max(w - 1, 1)
    centre[:, 1] *= 2 / max(h - 1, 1)
    centre[:, :2, 2] -= 1
    c = centre.to(x.dtype).view(-1, 3, 3, 1, 1)
    xs = torch.arange(w, device=x.device, dtype=x.dtype).view(1, 1, w)
    ys = torch.arange(h, device=x.device, dtype=x.dtype).view(1, h, 1)
    grid = torch.empty(len(c), h, w, 2, device=x.device, dtype=x.dtype)
    for i in (0, 1):  # written in place: stacking the two coordinates would cost a slow copy
        torch.add(c[:, i, 1] * ys + c[:, i, 2], c[:, i, 0] * xs, out=grid[..., i])
    fill = torch.tensor(ra.fill[: x.shape[1]], device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
    warped = F.grid_sample(x.sub_(fill), grid, mode=ra.interpolation, padding_mode="zeros", align_corners=True)
    return warped.add_(fill).clamp_(0, 1)


def _geometric(name: str) -> OpFn:
    kind_index = GEOMETRIC.index(name)

    def op(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
        kind = torch.full(level.shape, kind_index, device=x.device)
        amount = geometric_amount(kind, level, sign)
        return warp_(x.clone(), affine_matrices(kind, amount, *x.shape[-2:]), ra)

    return op


OPS: dict[str, OpFn] = {
    "AutoContrast": _auto_contrast,
    "Equalize": _equalize,
    "Invert": _invert,
    "Rotate": _geometric("Rotate"),
    "Posterize": _posterize,
    "Solarize": _solarize,
    "SolarizeAdd": _solarize_add,
    "Color": _color,
    "Contrast": _contrast,
    "Brightness": _brightness,
    "Sharpness": _sharpness,
    "ShearX": _geometric("ShearX"),
    "ShearY": _geometric("ShearY"),
    "TranslateXRel": _geometric("TranslateXRel"),
    "TranslateYRel": _geometric("TranslateYRel"),
}
"""timm's RandAugment op set (``_RAND_TRANSFORMS``); with ``inc1`` the magnitude maps to increasing severity."""


def apply_op(name: str, x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: OpSettings) -> torch.Tensor:
    """Op ``name`` on images ``x`` in [0, 1] at per-image magnitude ``level`` (0..10) and sign (+-1)."""
    return OPS[name](x, level, sign, ra)


def to_levels_(x: torch.Tensor) -> torch.Tensor:
    """Float images in [0, 1] (every op's output is) rounded to uint8 grey levels; overwrites ``x``."""
    return x.mul_(255).round_().to(torch.uint8)
