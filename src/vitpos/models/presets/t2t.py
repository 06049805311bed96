"""T2T-ViT-7 (Yuan et al., ICCV 2021, Table 1) and LaPE's T2T-ViT-7 (Table 1, Figs. 6 and 8).

``t2t_vit_7``: the tokens-to-token stem with performer layers of width 64, then 7 blocks of
width 256, 4 heads, MLP ratio 2, no query/key/value biases, a class token and the fixed 1-D
sinusoidal table (4,255,694 parameters and 4,096 random features: the 4.3M the paper prints).
Its prefix token gets no signal here; T2T-ViT's released code counts the class token as position
0 (``sincos1d:prefix``, selected when its weights are loaded). ``t2t_vit_7_lape``: LaPE on the
first three layers (``lape:eta=3``, LaPE's setting for T2T-ViT-7), 2 x 256 parameters each.
"""

from ...config import PositionConfig, T2TConfig
from ...registry import MODELS

T2T_VIT_7 = T2TConfig(
    img_size=224,
    embed_dim=256,
    depth=7,
    num_heads=4,
    mlp_ratio=2.0,
    t2t_layer="performer",
    position=PositionConfig(absolute="sincos1d"),
)

MODELS.add("t2t_vit_7", T2T_VIT_7)
MODELS.add("t2t_vit_7_lape", T2T_VIT_7.replace(join="lape:eta=3"))
