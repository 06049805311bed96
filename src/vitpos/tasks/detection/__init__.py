"""Object detection in DETR's way: the detector, boxes, Hungarian matching, set losses, predictions, COCO AP."""

from ...data.objects import ObjectTargets, pad_objects, unpad_objects
from . import presets  # noqa: F401  (registration)
from .boxes import box_area, box_cxcywh_to_xyxy, box_iou, box_xyxy_to_cxcywh, generalized_box_iou
from .config import DetrConfig
from .criterion import LossWeights, SetCriterion
from .matching import HungarianMatcher
from .model import DETR
from .postprocess import Detections, postprocess
from .task import DetectionMetrics, DetectionTask

__all__ = [
    "DETR",
    "DetrConfig",
    "DetectionMetrics",
    "DetectionTask",
    "box_area",
    "box_cxcywh_to_xyxy",
    "box_xyxy_to_cxcywh",
    "box_iou",
    "generalized_box_iou",
    "HungarianMatcher",
    "SetCriterion",
    "LossWeights",
    "Detections",
    "postprocess",
    "ObjectTargets",
    "pad_objects",
    "unpad_objects",
]
