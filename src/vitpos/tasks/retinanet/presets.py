"""RetinaNet detectors on PVT (CPVT §B.6, Table 13: "RetinaNet on COCO", 1x and 3x schedules).

Each preset is its classification preset's PVT host with RetinaNet's P3-P7 pyramid (256 channels)
and heads for COCO's 80 classes. As for the Semantic FPN presets, the host's tables stay at the
224 x 224 grids of the ImageNet hosts (so released weights fit) and are resampled to the input.
Parameter counts (tests/tasks/retinanet/test_model.py) round to Table 13's whole millions:

================================  ======  =====================================================
preset                            params  Table 13 row (mAP 1x)
================================  ======  =====================================================
``retinanet_pvt_tiny``            23.0M   PVT-tiny (36.7): learned tables, class token
``retinanet_pvt_tiny_peg``        22.6M   +PEG (38.0): PEG after the first block of every stage
``retinanet_pvt_tiny_gap``        23.0M   +GAP (36.9): no class token
``retinanet_pvt_tiny_peg_gap``    22.6M   +PEG+GAP (38.7)
``retinanet_pvt_small``           34.2M   PVT-small (40.4)
``retinanet_pvt_small_peg_gap``   33.8M   PVT-small+PEG+GAP (43.0)
``retinanet_pvt_medium``          53.9M   PVT-medium (41.9)
``retinanet_pvt_medium_peg_gap``  53.6M   PVT-medium+PEG+GAP (44.3)
================================  ======  =====================================================

PEG as CPVT puts it into PVT: the tables removed, one PEG after the first block of each stage
(``peg@0``); GAP only says that no class token joins the last stage (a detector pools nothing).
"""

from ...models.presets.pvt import PVT_MEDIUM, PVT_SMALL, PVT_TINY
from ...registry import MODELS
from . import model  # noqa: F401  (registers the 'retinanet' architecture)
from .config import RetinaNetConfig

PEG = dict(absolute="none", conditional="peg@0")

for size, host in (("tiny", PVT_TINY), ("small", PVT_SMALL), ("medium", PVT_MEDIUM)):
    MODELS.add(f"retinanet_pvt_{size}", RetinaNetConfig.on(host))
    if size == "tiny":
        MODELS.add("retinanet_pvt_tiny_peg", RetinaNetConfig.on(host.replace(**PEG)))
        MODELS.add("retinanet_pvt_tiny_gap", RetinaNetConfig.on(host.replace(head="gap")))
    MODELS.add(f"retinanet_pvt_{size}_peg_gap", RetinaNetConfig.on(host.replace(**PEG, head="gap")))
