"""DeiT III (Touvron et al., ECCV 2022) and the RoPE-ViT models trained on it (Heo et al., ECCV 2024).

DeiT III's ViTs are DeiT's with LayerScale (``layer_scale=1e-4``) and a learned table without a
class-token row (``learned:noprefix``); its names here are timm's (``deit3_small_patch16_224``).
RoPE-ViT (naver-ai/rope-vit, ``deit/models_v2_rope.py``) rotates queries and keys on every
layer: RoPE-Axial (``rope2d:axial``, theta 100) or RoPE-Mixed (``rope2d:mixed``, theta 10, learned
frequencies per layer and head), each without an absolute table or with DeiT III's (``_ape``).
The names are the authors'; ``create_model(NAME, pretrained=True)`` loads their released files.
Their Swin-T and Swin-S (``swin_rope_{axial,mixed}_{tiny,small}_patch4_window7_224``) rotate
queries and keys inside the windows instead of adding Swin's bias: RoPE-Axial at θ 50, RoPE-Mixed
at θ 10.
"""

from ...config import PositionConfig, ViTConfig
from ...registry import MODELS
from .swin import SWIN_SMALL, SWIN_TINY

SIZES = {"small": (384, 12, 6), "base": (768, 12, 12), "large": (1024, 24, 16)}
"""Width, depth and heads of each size (DeiT III's, 64 channels a head)."""
ROPE = {"axial": "rope2d:axial", "mixed": "rope2d:mixed"}
"""RoPE-ViT's two rotations by their names' word."""
SWIN_ROPE = {"axial": "rope2d:axial:theta=50", "mixed": "rope2d:mixed"}
"""The same in their Swin models (the axial one at theta 50)."""
TABLE = "learned:noprefix"
"""DeiT III's learned table: grid cells only, the class token gets no position."""


def deit3(size: str, position: PositionConfig) -> ViTConfig:
    """A DeiT III ViT of ``size`` at 224 px with ``position``."""
    embed_dim, depth, num_heads = SIZES[size]
    return ViTConfig(
        img_size=224, patch_size=16, embed_dim=embed_dim, depth=depth, num_heads=num_heads, layer_scale=1e-4,
        position=position,
    )  # fmt: skip


for _size in SIZES:
    MODELS.add(f"deit3_{_size}_patch16_224", deit3(_size, PositionConfig(absolute=TABLE)))
    for _word, _relative in ROPE.items():
        MODELS.add(
            f"rope_{_word}_deit_{_size}_patch16_LS", deit3(_size, PositionConfig(absolute="none", relative=_relative))
        )
        MODELS.add(
            f"rope_{_word}_ape_deit_{_size}_patch16_LS",
            deit3(_size, PositionConfig(absolute=TABLE, relative=_relative)),
        )

for _size, _swin in {"tiny": SWIN_TINY, "small": SWIN_SMALL}.items():
    for _word, _relative in SWIN_ROPE.items():
        MODELS.add(f"swin_rope_{_word}_{_size}_patch4_window7_224", _swin.replace(relative=_relative))
