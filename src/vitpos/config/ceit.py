"""CeiT's config (Yuan et al., ICCV 2021): image-to-tokens stem, LeFF blocks, layer-wise class-token attention.

The stem (I2T) is a 7 x 7 convolution of stride 2 to ``stem_channels`` channels, BatchNorm and a
3 x 3 max-pool of stride 2, then ``patch_size`` x ``patch_size`` patches of that map: 4 x
``patch_size`` pixels per token. The blocks' feed-forward is the locally enhanced one (LeFF: a
depthwise ``leff_kernel`` convolution on the patch-token map between two pointwise ones, each
followed by BatchNorm); the class tokens of every block meet in one more attention layer (LCA).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..validation import bounded
from .vit import ViTConfig

__all__ = ["CeiTConfig", "STEM_KERNEL", "STEM_STRIDE", "POOL"]

STEM_KERNEL, STEM_STRIDE = 7, 2
"""The I2T convolution (padding kernel // 2)."""
POOL = (3, 2, 1)
"""The I2T max-pool: kernel, stride, padding."""


@dataclass(kw_only=True)
class CeiTConfig(ViTConfig):
    """CeiT: the I2T stem, LeFF blocks and LCA over the blocks' class tokens (which need ``head='cls'``)."""

    arch: str = bounded("ceit", choices=("ceit",))
    """Host architecture: 'ceit'."""
    patch_size: int = bounded(4, ge=1)
    """Side of the patches cut from the stem's map (4 x this many pixels per token)."""
    stem_channels: int = bounded(64, ge=1)
    """Channels of the stem's convolution."""
    leff_kernel: int = bounded(3, ge=1)
    """Side of LeFF's depthwise convolution (odd: it keeps the grid)."""

    def _check_image_size(self) -> None:
        if self.pad_to_patch:
            raise ConfigError("pad_to_patch does not apply to arch='ceit': its stem takes any image size")
        if not self.class_token:
            raise ConfigError("arch='ceit' needs the class token (head='cls'): its last layer attends over them")
        if self.leff_kernel % 2 == 0:
            raise ConfigError(f"leff_kernel={self.leff_kernel} must be odd so that LeFF keeps the grid")

    @property
    def size_multiple(self) -> int:
        return 1

    @property
    def stem_stride(self) -> int:
        return STEM_STRIDE * POOL[1] * self.patch_size

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid for an image of size ``image_hw``: convolution, pooling, then whole patches."""
        sides = []
        for side in image_hw:
            side = (side + 2 * (STEM_KERNEL // 2) - STEM_KERNEL) // STEM_STRIDE + 1
            side = (side + 2 * POOL[2] - POOL[0]) // POOL[1] + 1
            side //= self.patch_size
            if side < 1:
                raise ValueError(
                    f"image size {image_hw[0]}x{image_hw[1]} is too small for CeiT's stem: use at least "
                    f"{self.stem_stride} pixels a side"
                )
            sides.append(side)
        return [(sides[0], sides[1])]
