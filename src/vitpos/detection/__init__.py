"""Object detection in DETR's way: boxes, Hungarian matching, set losses, predictions, COCO AP."""

from .boxes import box_area, box_cxcywh_to_xyxy, box_iou, box_xyxy_to_cxcywh, generalized_box_iou
from .criterion import LossWeights, SetCriterion
from .matching import HungarianMatcher
from .postprocess import Detections, postprocess
from .targets import ObjectTargets, pad_objects, unpad_objects

__all__ = [
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
