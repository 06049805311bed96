"""LaPE (Yu et al., ICCV 2023) on the plain ViTs: the learned encoding, LaPE in every layer."""

from ...registry import MODELS
from .deit import DEIT_SMALL, DEIT_TINY, VIT_LITE_7_4

MODELS.add("deit_tiny_patch16_224_lape", DEIT_TINY.replace(join="lape"))
MODELS.add("deit_small_patch16_224_lape", DEIT_SMALL.replace(join="lape"))
MODELS.add("vit_lite_7_4_lape", VIT_LITE_7_4.replace(join="lape"))
