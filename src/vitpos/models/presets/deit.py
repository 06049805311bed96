"""ViT/DeiT sizes (Touvron et al. 2021) and the CIFAR-sized ViT-Lite (Hassani et al. 2021).

``vit_small_patch16_224`` is timm's name for the DeiT-S architecture (timm builds both from the
same arguments), so timm's ViT-S/16 files load into it under the name timm gives them.
"""

from ...config import ViTConfig
from ...registry import MODELS

DEIT_TINY = ViTConfig(img_size=224, patch_size=16, embed_dim=192, depth=12, num_heads=3)
DEIT_SMALL = ViTConfig(img_size=224, patch_size=16, embed_dim=384, depth=12, num_heads=6)
DEIT_BASE = ViTConfig(img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12)
VIT_LITE_7_4 = ViTConfig(img_size=32, patch_size=4, embed_dim=256, depth=7, num_heads=4, mlp_ratio=2.0, num_classes=10)

MODELS.add("deit_tiny_patch16_224", DEIT_TINY)
MODELS.add("deit_small_patch16_224", DEIT_SMALL)
MODELS.add("vit_small_patch16_224", DEIT_SMALL)
MODELS.add("deit_base_patch16_224", DEIT_BASE)
MODELS.add("vit_lite_7_4", VIT_LITE_7_4)
