"""CeiT-T and CeiT-S (Yuan et al., ICCV 2021, Table 2) and LaPE's (Table 1, Fig. 8).

``ceit_tiny`` / ``ceit_small``: the I2T stem (64 channels, 4 x 4 patches of its map: a 14 x 14
grid at 224 px), 12 LeFF blocks of width 192 / 384 with 3 / 6 heads, MLP ratio 4, a depthwise
3 x 3 convolution, a class token, LCA and a learned position table: 6,356,904 and 24,204,840
parameters, the 6.4M and 24.2M the paper prints. ``*_lape``: LaPE in every layer, 2 D each.
"""

from ...config import CeiTConfig
from ...registry import MODELS

CEIT_TINY = CeiTConfig(img_size=224, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4.0, drop_path_rate=0.1)
CEIT_SMALL = CEIT_TINY.replace(embed_dim=384, num_heads=6)

for _name, _cfg in {"ceit_tiny": CEIT_TINY, "ceit_small": CEIT_SMALL}.items():
    MODELS.add(_name, _cfg)
    MODELS.add(f"{_name}_lape", _cfg.replace(join="lape"))
