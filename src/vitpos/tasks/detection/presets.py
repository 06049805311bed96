"""DETR presets: iRPE's Table 6 rows on a detector small enough to train on a CPU, and DETR-R50's shapes.

``detr_tiny_*``: a 2-layer CNN stem (stride 4), width 64, 4 heads, 2 encoder and 2 decoder
layers, feed-forward 256, 8 queries, 32 x 32 images (an 8 x 8 encoder grid), 4 classes (the
colours of ``synthetic:detect``); any size that is a multiple of 4 runs. The relative encodings are
iRPE's Product method, contextual or bias mode, on keys, shared by the heads, with 9 x 9
buckets (ratio 2, beta 4), as the authors' DETR code (``rpe-2.0-product-ctx-1-k``):

======================================  =========  =====================================
preset                                  Table 6    slots (absolute / relative)
======================================  =========  =====================================
``detr_tiny_sine``                      #1         sine / none
``detr_tiny_none``                      #2         none / none
``detr_tiny_sine_irpe_bias``            #3         sine / product bias 9x9
``detr_tiny_irpe_ctx``                  #4         none / product ctx 9x9
``detr_tiny_sine_irpe_ctx_clip``        #5         sine / product ctx 9x9, clip index
``detr_tiny_sine_irpe_ctx``             #6         sine / product ctx 9x9
``detr_tiny_sine_irpe_ctx_15``          #7         sine / product ctx 15x15 (ratio 3.5)
======================================  =========  =====================================

``detr_r50_shapes``: DETR-R50's transformer and heads (width 256, 8 heads, 6 + 6 layers, feed-forward
2048, 100 queries, 91 COCO category ids, stride 32) with the CNN stem standing in for ResNet-50
(its last width 2048, as ResNet-50's, so the input projection has DETR's shape). Without the
backbone it has 18,070,368 parameters: DETR's 18,069,856 (encoder 7,890,432, decoder 9,473,024
with its final norm, queries 25,600, input projection 524,544, class head 23,644, box head
132,612) plus the final encoder LayerNorm of the pre-norm form (512). DETR's published 41.3M
(41,302,368 trainable, its log) adds ResNet-50's 23,232,512 trainable parameters (conv1 and
layer1 frozen, BatchNorm frozen as buffers). tests/tasks/detection/test_detr.py asserts the count.

DETR on vitpos hosts: DETR-R50's transformer and heads (``detr_r50_shapes`` without its stem) on
the last stage of a classification preset, whose weights (in any layout ``create_model`` reads,
e.g. PVT's or Swin's released checkpoints) load into ``backbone.host`` with
``vitpos train --init``; the encoder keeps its sine encoding:

=========================  ==================================================  ======
preset                     backbone                                            stride
=========================  ==================================================  ======
``detr_pvt_tiny``          ``pvt_tiny`` (learned tables, class token)          32
``detr_pvt_tiny_peg_gap``  ``pvt_tiny_peg_gap`` (CPVT's PEG, no tables)        32
``detr_pvt_small``         ``pvt_small``                                       32
``detr_swin_tiny``         ``swin_tiny`` (window bias)                         32
``detr_deit_small``        ``deit_small_patch16_224`` (one stage)              16
=========================  ==================================================  ======
"""

from ...models.presets.deit import DEIT_SMALL
from ...models.presets.pvt import PVT_SMALL, PVT_TINY
from ...models.presets.swin import SWIN_TINY
from ...registry import MODELS
from . import model  # noqa: F401  (registers the 'detr' architecture)
from .config import DetrConfig

DETR_TINY = DetrConfig()
RELATIVE_9 = "irpe:product:{mode}:k:ratio=2"

MODELS.add("detr_tiny_sine", DETR_TINY)
MODELS.add("detr_tiny_none", DETR_TINY.replace(absolute="none"))
MODELS.add("detr_tiny_sine_irpe_bias", DETR_TINY.replace(relative=RELATIVE_9.format(mode="bias")))
MODELS.add("detr_tiny_irpe_ctx", DETR_TINY.replace(absolute="none", relative=RELATIVE_9.format(mode="ctx")))
MODELS.add("detr_tiny_sine_irpe_ctx_clip", DETR_TINY.replace(relative=RELATIVE_9.format(mode="ctx") + ":clip"))
MODELS.add("detr_tiny_sine_irpe_ctx", DETR_TINY.replace(relative=RELATIVE_9.format(mode="ctx")))
MODELS.add("detr_tiny_sine_irpe_ctx_15", DETR_TINY.replace(relative="irpe:product:ctx:k:ratio=3.5"))

DETR_R50 = DetrConfig(
    img_size=800,
    patch_size=32,
    num_classes=91,
    stem_widths=(64, 128, 256, 512, 2048),
    embed_dim=256,
    num_heads=8,
    enc_depth=6,
    dec_depth=6,
    mlp_ratio=8.0,
    num_queries=100,
    drop_rate=0.1,
)
MODELS.add("detr_r50_shapes", DETR_R50)

DETR_TRANSFORMER = {
    name: getattr(DETR_R50, name)
    for name in ("img_size", "num_classes", "embed_dim", "num_heads", "enc_depth", "dec_depth", "mlp_ratio")
} | {"num_queries": DETR_R50.num_queries, "drop_rate": DETR_R50.drop_rate}
"""DETR-R50's transformer and heads, without its backbone."""
PVT_PEG = PVT_TINY.replace(absolute="none", conditional="peg@0", head="gap")

MODELS.add("detr_pvt_tiny", DetrConfig.on(PVT_TINY, **DETR_TRANSFORMER))
MODELS.add("detr_pvt_tiny_peg_gap", DetrConfig.on(PVT_PEG, **DETR_TRANSFORMER))
MODELS.add("detr_pvt_small", DetrConfig.on(PVT_SMALL, **DETR_TRANSFORMER))
MODELS.add("detr_swin_tiny", DetrConfig.on(SWIN_TINY, **DETR_TRANSFORMER))
MODELS.add("detr_deit_small", DetrConfig.on(DEIT_SMALL, **DETR_TRANSFORMER))
