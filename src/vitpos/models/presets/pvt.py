"""PVT (Wang et al., ICCV 2021) sizes, and CPVT's PVT with PEG and GAP (Chu et al., §4.6, Table 13).

``pvt_tiny``/``pvt_small`` are PVT v1: patch 4 then 2, widths 64-128-320-512, heads 1-2-5-8,
MLP ratios 8-8-4-4, spatial-reduction ratios 8-4-2-1, depths 2-2-2-2 (tiny) and 3-4-6-3
(small), a learned position table per stage and a class token in the last stage (13.2M and
24.5M parameters). ``*_peg_gap`` remove the tables and the class token and put one PEG after
the first block of every stage (``peg@0``, per stage), pooling by GAP (CPVT's PVT+PEG+GAP).
``PVT_MEDIUM`` (depths 3-4-18-3, 44.2M) is only the host of the RetinaNet presets' medium rows
(a classification preset would need a legacy checkpoint fixture, as each has).
"""

from ...config import PVTConfig
from ...registry import MODELS

PVT_TINY = PVTConfig(
    img_size=224,
    patch_size=4,
    embed_dims=(64, 128, 320, 512),
    depths=(2, 2, 2, 2),
    num_heads=(1, 2, 5, 8),
    mlp_ratios=(8.0, 8.0, 4.0, 4.0),
    sr_ratios=(8, 4, 2, 1),
    head="cls",
    drop_path_rate=0.1,
)
PVT_SMALL = PVT_TINY.replace(depths=(3, 4, 6, 3))
PVT_MEDIUM = PVT_TINY.replace(depths=(3, 4, 18, 3))

MODELS.add("pvt_tiny", PVT_TINY)
MODELS.add("pvt_small", PVT_SMALL)
MODELS.add("pvt_tiny_peg_gap", PVT_TINY.replace(absolute="none", conditional="peg@0", head="gap"))
MODELS.add("pvt_small_peg_gap", PVT_SMALL.replace(absolute="none", conditional="peg@0", head="gap"))
