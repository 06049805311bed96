"""RandAugment as DeiT trains with it (timm's ``rand-m9-mstd0.5-inc1``), batched on the training device.

timm applies each op to one Pillow image; here every op runs on a batch of float images in
[0, 1] with one magnitude per image, built from kornia's ops (equalize, posterize, sharpness,
grayscale, affine warps) where they compute Pillow's definition, and as Pillow's own blend
formulas where kornia's differ (its brightness adds, its contrast does not blend with the mean,
its saturation works in HSV). Per layer (``n``, default 2) each image picks one op of the set at
random, applies it with probability 0.5, at magnitude ``m`` (0..10) plus normal noise of std
``mstd``, clipped to [0, 10]. ``inc1`` selects timm's "increasing" set, whose severity grows with
the magnitude; signed ops (rotate, shear, translate, enhance) negate the magnitude with odds 1/2.

Differences from timm, each below one grey level on 8-bit images: ops run on floats rather than
on uint8 (Pillow truncates every intermediate to an integer); geometric ops resample through
``grid_sample`` (bicubic by default, as DeiT's Pillow bicubic; at the image border the fill
colour blends in slightly differently).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kornia
import torch

__all__ = ["RandAugment", "OPS", "apply_op", "affine_matrix"]

MAX_LEVEL = 10.0
"""timm's magnitude scale: 10 is the strongest."""

OpFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "RandAugment"], torch.Tensor]


def _per_image(v: torch.Tensor) -> torch.Tensor:
    return v.view(-1, 1, 1, 1)


def _grey(x: torch.Tensor) -> torch.Tensor:
    """Pillow's ``L`` conversion (ITU-R 601-2 luma) broadcast over the channels."""
    return kornia.color.rgb_to_grayscale(x).expand_as(x) if x.shape[1] == 3 else x


def _blend(degenerate: torch.Tensor, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Pillow's ``ImageEnhance``: ``degenerate + factor * (x - degenerate)``, clipped."""
    return (degenerate + _per_image(factor) * (x - degenerate)).clamp(0, 1)


def _auto_contrast(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    lo, hi = x.amin(dim=(-2, -1), keepdim=True), x.amax(dim=(-2, -1), keepdim=True)
    stretched = (x - lo) / (hi - lo).clamp_min(1e-12)
    return torch.where(hi > lo, stretched, x)


def _equalize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    return kornia.enhance.equalize(x)


def _invert(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    return kornia.enhance.invert(x)


def _posterize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    bits = (level / MAX_LEVEL * 4).long()
    bits = 4 - bits if ra.increasing else bits + 4  # bits kept: 4 down to 0, or 4 up to 8
    keep = (x.mul(255).round().to(torch.uint8) & _per_image((256 - 2 ** (8 - bits)).to(torch.uint8))).float() / 255
    return torch.where(_per_image(bits >= 8), x, keep)


def _solarize(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    threshold = (level / MAX_LEVEL * 256).long()
    threshold = 256 - threshold if ra.increasing else threshold
    return kornia.enhance.solarize(x, threshold.to(x.dtype) / 255)


def _solarize_add(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    add = (level / MAX_LEVEL * 110).long().float() / 255
    return torch.where(x < 128 / 255, (x + _per_image(add)).clamp(max=1.0), x)


def _factor(level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    """Enhancement factor: 1 +- 0.9 * m / 10 (at least 0.1) increasing, else 0.1 + 1.8 * m / 10."""
    if ra.increasing:
        return (1.0 + sign * level / MAX_LEVEL * 0.9).clamp_min(0.1)
    return level / MAX_LEVEL * 1.8 + 0.1


def _color(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    return _blend(_grey(x), x, _factor(level, sign, ra))


def _contrast(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    grey_levels = _grey(x)[:, :1].mul(255).round()
    mean = grey_levels.mean(dim=(-3, -2, -1), keepdim=True).add(0.5).floor() / 255  # Pillow: int(mean + 0.5)
    return _blend(mean.expand_as(x), x, _factor(level, sign, ra))


def _brightness(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    return _blend(torch.zeros_like(x), x, _factor(level, sign, ra))


def _sharpness(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    return kornia.enhance.sharpness(x, _factor(level, sign, ra)).clamp(0, 1)


def affine_matrix(name: str, amount: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pillow's inverse map (output pixel corner -> input) of op ``name`` per image, (B, 3, 3)."""
    b = amount.shape[0]
    m = torch.eye(3, dtype=torch.float64, device=amount.device).repeat(b, 1, 1)
    amount = amount.double()
    if name == "Rotate":  # Image.rotate: counter-clockwise about the centre
        a = -torch.deg2rad(amount)
        cx, cy = width / 2.0, height / 2.0
        m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = a.cos(), a.sin(), -a.sin(), a.cos()
        m[:, 0, 2] = a.cos() * -cx + a.sin() * -cy + cx
        m[:, 1, 2] = -a.sin() * -cx + a.cos() * -cy + cy
    elif name == "ShearX":
        m[:, 0, 1] = amount
    elif name == "ShearY":
        m[:, 1, 0] = amount
    elif name == "TranslateXRel":
        m[:, 0, 2] = amount * width
    elif name == "TranslateYRel":
        m[:, 1, 2] = amount * height
    else:
        raise ValueError(f"{name} is not a geometric op")
    return m


_GEOMETRIC_RANGE = {"Rotate": 30.0, "ShearX": 0.3, "ShearY": 0.3, "TranslateXRel": 0.45, "TranslateYRel": 0.45}
"""timm's amount at magnitude 10 (degrees, shear factor, fraction of the image)."""


def _geometric(name: str) -> OpFn:
    def op(x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
        h, w = x.shape[-2:]
        inverse = affine_matrix(name, sign * level / MAX_LEVEL * _GEOMETRIC_RANGE[name], h, w)
        shift = torch.eye(3, dtype=torch.float64, device=x.device)
        shift[:2, 2] = 0.5  # pixel centres (kornia) <-> pixel corners (Pillow)
        forward = torch.linalg.inv(shift.inverse() @ inverse @ shift)[:, :2].to(x.dtype)
        fill = torch.tensor(ra.fill[: x.shape[1]], device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
        warped = kornia.geometry.transform.warp_affine(x - fill, forward, (h, w), mode=ra.interpolation)
        return (warped + fill).clamp(0, 1)  # outside the image: the fill colour

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


def apply_op(name: str, x: torch.Tensor, level: torch.Tensor, sign: torch.Tensor, ra: RandAugment) -> torch.Tensor:
    """Op ``name`` on images ``x`` in [0, 1] at per-image magnitude ``level`` (0..10) and sign (+-1)."""
    return OPS[name](x, level, sign, ra)


@dataclass(frozen=True)
class RandAugment:
    """timm's RandAugment (see the module docstring); ``fill`` is the colour geometric ops leave outside."""

    magnitude: float = 9.0
    layers: int = 2
    magnitude_std: float = 0.5
    increasing: bool = True
    prob: float = 0.5
    fill: tuple[float, ...] = (0.485, 0.456, 0.406)
    interpolation: str = "bicubic"

    @classmethod
    def from_spec(cls, spec: str, fill: tuple[float, ...] = (0.485, 0.456, 0.406)) -> RandAugment:
        """Parse timm's notation ``rand-m9-n2-mstd0.5-inc1`` (m: magnitude, n: layers, mstd, inc)."""
        name, *parts = spec.split("-")
        keys = {
            "m": ("magnitude", float),
            "n": ("layers", int),
            "mstd": ("magnitude_std", float),
            "inc": ("increasing", int),
        }
        values: dict[str, float] = {}
        for part in parts:
            key = next((k for k in sorted(keys, key=len, reverse=True) if part.startswith(k)), None)
            try:
                if name != "rand" or key is None:
                    raise ValueError
                field, kind = keys[key]
                values[field] = kind(part[len(key) :])
            except ValueError:
                raise ValueError(
                    f"cannot read RandAugment spec {spec!r} at {part if name == 'rand' else name!r}: write "
                    "rand-m<magnitude>[-n<layers>][-mstd<std>][-inc<0|1>], e.g. rand-m9-mstd0.5-inc1 (DeiT)"
                ) from None
        increasing = bool(values.pop("increasing", 0))
        return cls(**values, increasing=increasing, fill=fill)  # type: ignore[arg-type]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Augment float images (B, C, H, W) in [0, 1], each its own ops and magnitudes."""
        b, dev = x.shape[0], x.device
        names = list(OPS)
        for _ in range(self.layers):
            pick = torch.randint(len(names), (b,), device=dev)
            on = torch.rand(b, device=dev) < self.prob
            level = (self.magnitude + self.magnitude_std * torch.randn(b, device=dev)).clamp(0, MAX_LEVEL)
            sign = torch.where(torch.rand(b, device=dev) < 0.5, -1.0, 1.0)
            out = x.clone()
            for k, name in enumerate(names):
                rows = ((pick == k) & on).nonzero().squeeze(1)
                if rows.numel():
                    out[rows] = apply_op(name, x[rows], level[rows], sign[rows], self)
            x = out
        return x
