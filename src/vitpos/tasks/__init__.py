"""Tasks as plug-ins: classification (and regression), detection (DETR, RetinaNet) and segmentation (Semantic FPN).

Each package owns its models' configs and presets, its loss, metrics and headline metric, and
registers a :class:`~.base.TaskKind`; importing this package registers them all.
"""

from . import classification, detection, retinanet, segmentation  # noqa: F401  (registration)
from .base import Metrics, Task, TaskKind, loss_precision, primary_metric, task_for, task_kind

__all__ = ["Metrics", "Task", "TaskKind", "loss_precision", "primary_metric", "task_for", "task_kind"]
