"""The simplified ViT of the thesis's controlled experiments (Zhang 2022, §4.1): one encoder block.

The thesis fixes the depth ("only one encoder block; the rest components are the same as the
original ViT": class token, learned position embedding, pre-norm block) but not the width,
head count or patch size. We choose patch 4 on 32x32 inputs (an 8x8 grid, so the red-green
squares, one patch wide, have 64 places), width 64 and 4 heads: small enough to train a task
in seconds on a CPU.
"""

from ...config import ViTConfig
from ...registry import MODELS

THESIS_VIT = ViTConfig(img_size=32, patch_size=4, embed_dim=64, depth=1, num_heads=4, mlp_ratio=4.0, num_classes=2)

MODELS.add("thesis_vit", THESIS_VIT)
