"""Swin-T and Swin-S (Liu et al., ICCV 2021) and their position-encoding variants from CPVT, iRPE and LaPE.

``swin_tiny``: patch 4, C = 96, depths 2-2-6-2, heads 3-6-12-24, window 7, MLP ratio 4, patch
merging, Swin's relative bias table in every block (``relative='swin'``), no absolute
encoding, GAP (28,288,354 parameters, the published 28.3M). The variants change one slot:

* ``swin_tiny_peg_gap`` — CPVT §4.6 / Fig. 4: "we remove its learnable PE and apply our PEG in
  position 0 of each stage with a GAP head"; for Swin the learnable PE is the bias table, so
  the tables go and one PEG follows the first block of every stage. Keep the tables with
  ``create_model("swin_tiny_peg_gap", relative="swin")``.
* ``swin_tiny_irpe_bias`` — iRPE supplement §6, bias mode: a scalar per head (unshared, which
  iRPE Table 2 finds better in bias mode) and product bucket, on keys, inside each window.
* ``swin_tiny_irpe_ctx`` — iRPE supplement §6, contextual product encoding on queries, keys and
  values, shared by the heads (the paper's final setting), inside each window.
* ``swin_tiny_lape`` — LaPE Table 1: every block's window bias layer-normalised over the keys.

``swin_small`` (Swin Table 1): Swin-T with depths 2-2-18-2 and stochastic depth 0.3 (49,606,258
parameters, the published 50M); ``swin_small_lape`` is LaPE's Table 1 row.

``swinv2_{tiny,small,base}_window{8,16}_256`` (Swin V2, Liu et al., CVPR 2022, the ImageNet-1K
models of its release, timm's names): 256-pixel images, window 8 or 16 (the last stage's 8 x 8 grid
is one window, as Swin V2 shrinks it), Swin V2's blocks (``swin_v2=True``: post-norm, cosine
attention, q and v biases) and the continuous position bias ``relative='cpb'``; Swin-T / S / B
sizes with stochastic depth 0.2 / 0.3 / 0.5 as in their training configs (28,347,154 /
49,728,418 / 87,918,816 parameters, the published 28M / 50M / 88M).
"""

from ...config import PositionConfig, SwinConfig
from ...registry import MODELS

SWIN_TINY = SwinConfig(
    img_size=224,
    patch_size=4,
    embed_dims=(96, 192, 384, 768),
    depths=(2, 2, 6, 2),
    num_heads=(3, 6, 12, 24),
    mlp_ratios=(4.0, 4.0, 4.0, 4.0),
    window_size=7,
    head="gap",
    drop_path_rate=0.2,
    position=PositionConfig(absolute="none", relative="swin"),
)

SWIN_SMALL = SWIN_TINY.replace(depths=(2, 2, 18, 2), drop_path_rate=0.3)

MODELS.add("swin_tiny", SWIN_TINY)
MODELS.add("swin_small", SWIN_SMALL)
MODELS.add("swin_small_lape", SWIN_SMALL.replace(join="lape"))
MODELS.add("swin_tiny_peg_gap", SWIN_TINY.replace(relative="none", conditional="peg@0"))
MODELS.add("swin_tiny_irpe_bias", SWIN_TINY.replace(relative="irpe:product:bias:k:unshared"))
MODELS.add("swin_tiny_irpe_ctx", SWIN_TINY.replace(relative="irpe:product:ctx:qkv"))
MODELS.add("swin_tiny_lape", SWIN_TINY.replace(join="lape"))

SWINV2_TINY = SWIN_TINY.replace(img_size=256, window_size=8, swin_v2=True, relative="cpb")
SWINV2_SIZES = {
    "tiny": SWINV2_TINY,
    "small": SWINV2_TINY.replace(depths=(2, 2, 18, 2), drop_path_rate=0.3),
    "base": SWINV2_TINY.replace(
        embed_dims=(128, 256, 512, 1024), depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), drop_path_rate=0.5
    ),
}

for size, config in SWINV2_SIZES.items():
    for window in (8, 16):
        MODELS.add(f"swinv2_{size}_window{window}_256", config.replace(window_size=window))
