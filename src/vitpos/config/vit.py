"""The plain ViT's config (ViT, DeiT, CPVT, ViT-Lite): one stage of ``depth`` blocks on the patch grid."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..validation import bounded
from .host import HostConfig, StageGeometry
from .position import SlotContext

__all__ = ["ViTConfig", "ModelConfig"]


@dataclass(kw_only=True)
class ViTConfig(HostConfig):
    """Everything needed to build a plain ViT (a pyramid of one stage); its presets are instances."""

    arch: str = bounded("vit", choices=("vit",))
    """Host architecture: 'vit' (PVT and Swin have :class:`~.pyramid.PVTConfig` and :class:`~.pyramid.SwinConfig`)."""
    embed_dim: int = bounded(192, ge=1)
    """Token width D."""
    depth: int = bounded(12, ge=1)
    """Number of encoder blocks."""
    num_heads: int = bounded(3, ge=1)
    """Attention heads per block."""
    mlp_ratio: float = bounded(4.0, gt=0)
    """MLP hidden width as a multiple of the token width."""
    reg_tokens: int = bounded(0, ge=0)
    """Extra learned prefix tokens (registers) after the class (and distillation) token."""
    distilled: bool = False
    """DeiT's distillation token after the class token, with its own head; the two heads' logits are
    averaged at inference, and hard distillation trains each on its own target."""
    pad_to_patch: bool = False
    """Zero-pad inputs whose size is not a multiple of the patch size instead of raising."""

    def __post_init__(self) -> None:
        self._check_common()
        if self.embed_dim % self.num_heads:
            divisors = [d for d in range(1, min(self.embed_dim, 64) + 1) if self.embed_dim % d == 0][:6]
            raise ConfigError(
                f"embed_dim={self.embed_dim} is not divisible by num_heads={self.num_heads}; choose a head count "
                f"that divides the width (num_heads {', '.join(map(str, divisors))}, ...) or a multiple of "
                f"{self.num_heads} as embed_dim"
            )
        if self.distilled and not self.class_token:
            raise ConfigError("distilled=True needs the class token (head='cls'): DeiT averages the two tokens' heads")
        self._check_image_size()
        self._resolve_stages()

    def _check_image_size(self) -> None:
        """Raise unless the stem cuts the training image into whole patches (or pads it)."""
        h, w = self.image_hw
        if not self.pad_to_patch and (h % self.patch_size or w % self.patch_size):
            raise ConfigError(
                f"img_size {self.img_size} is not divisible by patch_size {self.patch_size}; "
                "change the size or set pad_to_patch=True"
            )

    @property
    def stem_stride(self) -> int:
        """Pixels per token of the stem (the patch size)."""
        return self.patch_size

    @property
    def prefix_tokens(self) -> int:
        """Prefix tokens of the one stage: the class token, the distillation token, then the registers."""
        return int(bool(self.class_token)) + self.distillation_tokens + self.reg_tokens

    @property
    def distillation_tokens(self) -> int:
        return int(self.distilled)

    def stage_geometry(self) -> list[StageGeometry]:
        """One stage on the patch grid; it holds the prefix tokens."""
        (grid,) = self.stage_grids(self.image_hw)
        ctx = SlotContext(self.embed_dim, self.num_heads, self.depth, grid, self.prefix_tokens)
        return [StageGeometry(ctx, self.mlp_ratio, self.stem_stride, ctx)]

    @property
    def grid(self) -> tuple[int, int]:
        """The native token grid (H, W) in patches."""
        return self.stage_grid(0)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of the one stage for an image of size ``image_hw``; raises if it does not fit."""
        from ..grid import patch_grid  # grids are torch's business: config stays importable without it

        return [patch_grid(image_hw, self.patch_size, pad=self.pad_to_patch)]


ModelConfig = ViTConfig
"""The earlier name of :class:`ViTConfig`."""
