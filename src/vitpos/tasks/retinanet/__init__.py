"""RetinaNet on the pyramid hosts: P3-P7 pyramid, anchors, focal loss, box coding, NMS (CPVT Table 13)."""

from . import presets  # noqa: F401  (registration)
from .anchors import cell_anchors, grid_anchors
from .assigner import assign_anchors
from .box_coding import decode_boxes, encode_boxes
from .config import RetinaNetConfig
from .criterion import RetinaNetLoss
from .focal_loss import sigmoid_focal_loss
from .model import RetinaNet
from .nms import batched_nms, nms

__all__ = [
    "RetinaNet",
    "RetinaNetConfig",
    "RetinaNetLoss",
    "assign_anchors",
    "batched_nms",
    "cell_anchors",
    "decode_boxes",
    "encode_boxes",
    "grid_anchors",
    "nms",
    "sigmoid_focal_loss",
]
