"""Semantic FPN segmenters on PVT and Swin (CPVT §B.6, Table 13: "Semantic FPN on ADE20K").

Each preset is its classification preset's host, with the FPN neck (256 channels) and the
semantic head (128 channels, GroupNorm) of Kirillov et al. (2019) for ADE20K's 150 classes.
Tables stay at the 224 x 224 grids of the ImageNet hosts (so their weights fit) and are
resampled to larger inputs, as PVT's segmentation code does. ``pvt_tiny_fpn`` has 17.0M
parameters and ``pvt_small_fpn`` 28.2M, PVT's published Semantic FPN sizes (CPVT Table 13:
17 and 28). The four PVT-tiny rows of Table 13:

* ``pvt_tiny_fpn``          PVT-tiny: learned table per stage, class token in the last stage
* ``pvt_tiny_peg_fpn``      + PEG after the first block of every stage, no tables (``peg@0``)
* ``pvt_tiny_gap_fpn``      + GAP: no class token
* ``pvt_tiny_peg_gap_fpn``  + PEG + GAP, CPVT's best (38.8 mIoU against 35.7)

and ``pvt_small_fpn`` / ``pvt_small_peg_gap_fpn``, ``swin_tiny_fpn`` (Swin's window bias) and
``swin_tiny_peg_gap_fpn`` (PEG instead of the bias tables). CPVT's classification pooling
(GAP) only says here whether a class token joins the last stage.
"""

from ...models.presets.pvt import PVT_SMALL, PVT_TINY
from ...models.presets.swin import SWIN_TINY
from ...registry import MODELS
from . import model  # noqa: F401  (registers the 'semantic_fpn' architecture)
from .config import SemanticFPNConfig

PEG = dict(absolute="none", conditional="peg@0")

MODELS.add("pvt_tiny_fpn", SemanticFPNConfig.on(PVT_TINY))
MODELS.add("pvt_tiny_peg_fpn", SemanticFPNConfig.on(PVT_TINY.replace(**PEG)))
MODELS.add("pvt_tiny_gap_fpn", SemanticFPNConfig.on(PVT_TINY.replace(head="gap")))
MODELS.add("pvt_tiny_peg_gap_fpn", SemanticFPNConfig.on(PVT_TINY.replace(**PEG, head="gap")))
MODELS.add("pvt_small_fpn", SemanticFPNConfig.on(PVT_SMALL))
MODELS.add("pvt_small_peg_gap_fpn", SemanticFPNConfig.on(PVT_SMALL.replace(**PEG, head="gap")))
MODELS.add("swin_tiny_fpn", SemanticFPNConfig.on(SWIN_TINY))
MODELS.add("swin_tiny_peg_gap_fpn", SemanticFPNConfig.on(SWIN_TINY.replace(relative="none", conditional="peg@0")))
