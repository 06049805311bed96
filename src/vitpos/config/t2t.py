"""T2T-ViT's config (Yuan et al., ICCV 2021): a tokens-to-token stem, then a plain ViT backbone.

The stem softly splits the image three times (unfold with kernel 7, stride 4, padding 2; then
kernel 3, stride 2, padding 1, twice), with a small transformer or performer layer re-structuring
the tokens between the splits, and projects the last split to the backbone width: 16 pixels per
token, any image size. The backbone blocks are ViT blocks without query/key/value biases.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..validation import bounded
from .vit import ViTConfig

__all__ = ["T2TConfig", "SOFT_SPLITS"]

SOFT_SPLITS = ((7, 4, 2), (3, 2, 1), (3, 2, 1))
"""(kernel, stride, padding) of the three soft splits."""


@dataclass(kw_only=True)
class T2TConfig(ViTConfig):
    """T2T-ViT: the tokens-to-token stem (``t2t_layer`` layers of width ``token_dim``) and a ViT backbone."""

    arch: str = bounded("t2t", choices=("t2t",))
    """Host architecture: 't2t' (tokens-to-token stem)."""
    t2t_layer: str = bounded("performer", choices=("performer", "transformer"))
    """The re-structuring layers of the stem: 'performer' (T2T-ViT-7 to 24) or 'transformer' (T2T-ViT_t)."""
    token_dim: int = bounded(64, ge=1)
    """Width of the stem's tokens between the soft splits."""
    qk_scale: float | None = bounded(None, gt=0)
    """The backbone's attention logit scale; None: head_dim^-0.5 (the paper's, and what the authors'
    README evaluates their weights with). Their ``pretrained=True`` path for T2T-ViT-7/10/12 sets 256^-0.5."""
    qkv_bias: bool = False
    """Biases on the backbone's query, key and value projections (T2T-ViT has none)."""

    def _check_image_size(self) -> None:
        if self.pad_to_patch:
            raise ConfigError("pad_to_patch does not apply to arch='t2t': its soft splits take any image size")

    @property
    def size_multiple(self) -> int:
        return 1

    @property
    def stem_stride(self) -> int:
        stride = 1
        for _, step, _ in SOFT_SPLITS:
            stride *= step
        return stride

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid for an image of size ``image_hw``: the three soft splits' arithmetic."""
        sides = []
        for side in image_hw:
            for kernel, step, padding in SOFT_SPLITS:
                side = (side + 2 * padding - kernel) // step + 1
            if side < 1:
                raise ValueError(
                    f"image size {image_hw[0]}x{image_hw[1]} is too small for T2T-ViT's soft splits; "
                    "use images of at least 3 pixels a side"
                )
            sides.append(side)
        return [(sides[0], sides[1])]
