"""DeiT with iRPE (Wu et al., ICCV 2021), named like the authors' released models.

The number in each name is the count of buckets the encoding actually uses on the 14x14
training grid, the class-token bucket included; the tables hold 2 floor(beta) + 1 (+1) rows
per axis, so Euclidean, Quantization and Cross keep unused rows, as the released models do.
The learned absolute position embedding stays, as in the released models. Quantization uses
the squared distances of the released code (``squared``); on the paper's ranked distances
``ratio=29`` also uses 51 buckets. Euclidean rounds the distance before g, as the released code
does (``round``; the same ids as Eq. 20 on the 14x14 grid, different beyond alpha = 20 at larger
grids). Each preset's parameters are exactly those of the released model of that name, so
``vitpos.create_model(name, checkpoint=PATH)`` loads its weights with no key left over.
"""

from ...registry import MODELS
from .deit import DEIT_BASE, DEIT_SMALL, DEIT_TINY

PRODUCT_50 = "irpe:product:ctx:{on}"  # ratio 1.9: 7 x 7 + 1 buckets

IRPE_PRESETS = {
    "deit_tiny_patch16_224_ctx_product_50_shared_k": (DEIT_TINY, PRODUCT_50.format(on="k")),
    "deit_small_patch16_224_ctx_euc_20_shared_k": (DEIT_SMALL, "irpe:euclidean:ctx:k:round:ratio=20"),
    "deit_small_patch16_224_ctx_quant_51_shared_k": (DEIT_SMALL, "irpe:quant:ctx:k:squared:ratio=33"),
    "deit_small_patch16_224_ctx_cross_56_shared_k": (DEIT_SMALL, "irpe:cross:ctx:k:ratio=20"),
    "deit_small_patch16_224_ctx_product_50_shared_k": (DEIT_SMALL, PRODUCT_50.format(on="k")),
    "deit_small_patch16_224_ctx_product_50_shared_qk": (DEIT_SMALL, PRODUCT_50.format(on="qk")),
    "deit_small_patch16_224_ctx_product_50_shared_qkv": (DEIT_SMALL, PRODUCT_50.format(on="qkv")),
    "deit_base_patch16_224_ctx_product_50_shared_k": (DEIT_BASE, PRODUCT_50.format(on="k")),
    "deit_base_patch16_224_ctx_product_50_shared_qkv": (DEIT_BASE, PRODUCT_50.format(on="qkv")),
}

for _name, (_base, _relative) in IRPE_PRESETS.items():
    MODELS.add(_name, _base.replace(relative=_relative))
