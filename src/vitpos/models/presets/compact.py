"""Compact Transformers (Hassani et al. 2021, Table 1) on 32 px CIFAR images, and LaPE's versions.

``vit_lite_7_4_compact`` (ViT-Lite-7/4: 4 x 4 patches, class token), ``cvt_7_4`` (CVT-7/4: the
same with sequence pooling) and ``cct_7_3x1`` (CCT-7/3x1: one 3 x 3 convolution, ReLU and max-pool,
sequence pooling): 7 of the authors' layers of width 256, 4 heads, MLP ratio 2, a learned
position embedding (ViT-Lite's has a row for the class token), attention dropout and stochastic
depth 0.1, 10 classes. They have 3,716,874, 3,716,619 and 3,760,139 parameters, the 3.72M,
3.72M and 3.76M the paper prints. ``*_lape`` are LaPE's (Table 2): a LayerNorm of the position
embedding per layer, 2 x 256 parameters each. CCT's embedding is optional (the paper's
``cct_7_3x1_sine`` and PE-free rows): ``create_model("cct_7_3x1", absolute="none")``.
``vit_lite_7_4`` (:mod:`.deit`) is the same size on the pre-norm ViT block with biased q, k, v.
"""

from ...config import CompactConfig
from ...registry import MODELS

CVT_7_4 = CompactConfig(
    img_size=32,
    patch_size=4,
    embed_dim=256,
    depth=7,
    num_heads=4,
    mlp_ratio=2.0,
    num_classes=10,
    attn_drop_rate=0.1,
    drop_path_rate=0.1,
    head="seq",
)
VIT_LITE_7_4_COMPACT = CVT_7_4.replace(head="cls")
CCT_7_3X1 = CVT_7_4.replace(tokenizer="conv", conv_layers=1, conv_kernel=3)

for _name, _cfg in {"vit_lite_7_4_compact": VIT_LITE_7_4_COMPACT, "cvt_7_4": CVT_7_4, "cct_7_3x1": CCT_7_3X1}.items():
    MODELS.add(_name, _cfg)
    MODELS.add(f"{_name}_lape", _cfg.replace(join="lape"))
