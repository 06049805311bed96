"""The Compact Transformers' config (Hassani et al. 2021): ViT-Lite, CVT and CCT on one stage.

The three differ in the stem and the pooling: ViT-Lite and CVT cut non-overlapping patches
(``tokenizer='patch'``), CCT runs ``conv_layers`` blocks of convolution (no bias), ReLU and a
3 x 3 max-pool of stride 2 (``tokenizer='conv'``); ViT-Lite classifies from a class token, CVT and
CCT by sequence pooling (``head='seq'``). The blocks are the authors' encoder layer
(:class:`~vitpos.models.compact.CompactBlock`) without query/key/value biases.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..validation import bounded
from .host import HEADS
from .vit import ViTConfig

__all__ = ["CompactConfig", "POOL_KERNEL", "POOL_STRIDE", "POOL_PADDING"]

POOL_KERNEL, POOL_STRIDE, POOL_PADDING = 3, 2, 1
"""The max-pool after every convolution of CCT's tokenizer."""


@dataclass(kw_only=True)
class CompactConfig(ViTConfig):
    """ViT-Lite / CVT / CCT: a patch or convolutional tokenizer, Compact Transformers' blocks, any head."""

    arch: str = bounded("compact", choices=("compact",))
    """Host architecture: 'compact' (Compact Transformers' encoder layer)."""
    tokenizer: str = bounded("patch", choices=("patch", "conv"))
    """'patch': a patch_size x patch_size convolution of stride patch_size (ViT-Lite, CVT); 'conv':
    ``conv_layers`` x (conv_kernel convolution, ReLU, 3 x 3 max-pool of stride 2) (CCT)."""
    conv_layers: int = bounded(1, ge=1)
    """Convolution blocks of the 'conv' tokenizer (CCT-7/3x1: 1)."""
    conv_kernel: int = bounded(3, ge=1)
    """Kernel side of the 'conv' tokenizer (CCT-7/3x1: 3); stride max(1, k // 2 - 1), padding max(1, k // 2)."""
    conv_channels: int = bounded(64, ge=1)
    """Channels between the convolutions of a 'conv' tokenizer with several layers."""
    qkv_bias: bool = False
    """Biases on the query, key and value projections (the authors' layers have none)."""
    head: str = bounded("seq", choices=HEADS)
    """'seq': sequence pooling (CVT, CCT); 'cls': class token (ViT-Lite); 'gap': mean of the tokens."""

    def _check_image_size(self) -> None:
        if self.tokenizer == "patch":
            super()._check_image_size()
        elif self.pad_to_patch:
            raise ConfigError("pad_to_patch applies to tokenizer='patch'; the 'conv' tokenizer takes any size")

    @property
    def conv_stride(self) -> int:
        """Stride of each tokenizer convolution, as the authors derive it from the kernel."""
        return max(1, self.conv_kernel // 2 - 1)

    @property
    def conv_padding(self) -> int:
        """Zero padding of each tokenizer convolution, as the authors derive it from the kernel."""
        return max(1, self.conv_kernel // 2)

    @property
    def size_multiple(self) -> int:
        return self.patch_size if self.tokenizer == "patch" else 1

    @property
    def stem_stride(self) -> int:
        if self.tokenizer == "patch":
            return self.patch_size
        return (self.conv_stride * POOL_STRIDE) ** self.conv_layers

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid for an image of size ``image_hw``: convolution and pooling arithmetic for 'conv'."""
        if self.tokenizer == "patch":
            return super().stage_grids(image_hw)
        sides = []
        for side in image_hw:
            for _ in range(self.conv_layers):
                side = (side + 2 * self.conv_padding - self.conv_kernel) // self.conv_stride + 1
                side = (side + 2 * POOL_PADDING - POOL_KERNEL) // POOL_STRIDE + 1
            if side < 1:
                raise ValueError(
                    f"image size {image_hw[0]}x{image_hw[1]} is too small for the convolutional tokenizer "
                    f"({self.conv_layers} layer(s) of kernel {self.conv_kernel}); use larger images"
                )
            sides.append(side)
        return [(sides[0], sides[1])]
