"""RandAugment as DeiT trains with it (timm's ``rand-m9-mstd0.5-inc1``), batched on the training device.

timm applies each op to one Pillow image; here a whole uint8 batch is augmented at once, each
image with its own ops and magnitudes (:mod:`.randaugment_batch`: a few batched kernels per layer,
grouped by kind of op), every op equal to its per-image definition (:mod:`.randaugment_ops`,
tested against the Pillow calls timm makes). Per layer (``n``, default 2) each image picks one op
of the set at random, applies it with probability 0.5, at magnitude ``m`` (0..10) plus normal
noise of std ``mstd``, clipped to [0, 10]. ``inc1`` selects timm's "increasing" set, whose severity
grows with the magnitude; signed ops (rotate, shear, translate, enhance) negate the magnitude with
odds 1/2.

Differences from timm, each below one grey level on 8-bit images: within an op the arithmetic is
in floats (Pillow truncates some intermediates to integers), and geometric ops resample through
``grid_sample`` (bicubic by default, as DeiT's Pillow bicubic; at the image border the fill colour
blends in slightly differently). Between ops images are whole grey levels, as in Pillow.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import VitposError
from .randaugment_batch import apply_layer_
from .randaugment_ops import MAX_LEVEL, OPS, affine_matrix, apply_op, to_levels_

__all__ = ["RandAugment", "OPS", "apply_op", "affine_matrix"]


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

    def draw(self, batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each layer's op index per image (-1: skipped), magnitude and sign, each (layers, batch)."""
        shape = (self.layers, batch)
        pick = torch.randint(len(OPS), shape, device=device)
        on = torch.rand(shape, device=device) < self.prob
        level = (self.magnitude + self.magnitude_std * torch.randn(shape, device=device)).clamp(0, MAX_LEVEL)
        sign = torch.where(torch.rand(shape, device=device) < 0.5, -1.0, 1.0)
        return torch.where(on, pick, -1), level, sign

    def _check(self, x: torch.Tensor) -> None:
        """Refuse what the ops cannot read as images: another shape, channel count or type of value."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise VitposError(
                f"RandAugment takes a batch of images (B, C, H, W), not {shape}; one image (C, H, W) is x[None]"
            )
        if x.shape[1] != len(self.fill):
            raise VitposError(
                f"RandAugment with a fill of {len(self.fill)} values takes {len(self.fill)}-channel images, not "
                f"{x.shape[1]} (shape {tuple(x.shape)}); drop an alpha channel with x[:, :3]"
            )
        if x.dtype != torch.uint8 and not x.is_floating_point():
            raise VitposError(
                f"RandAugment takes uint8 images (grey levels 0..255) or floats in [0, 1], not {x.dtype}: "
                "convert with x.to(torch.uint8) or x.float() / 255"
            )

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Augment images (B, C, H, W), each its own ops and magnitudes: uint8 in, uint8 out (floats in
        [0, 1] are rounded to grey levels first and come back as floats; other shapes, channel counts and
        integer types are refused)."""
        self._check(x)
        if x.dtype != torch.uint8:
            return self(to_levels_(x.clamp(0, 1))).float().div_(255.0)
        out = x.clone()
        op, level, sign = self.draw(x.shape[0], x.device)
        for layer in range(self.layers):
            apply_layer_(out, op[layer], level[layer], sign[layer], self)
        return out
