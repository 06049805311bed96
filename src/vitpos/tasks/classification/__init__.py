"""Classification and regression with the hosts' own heads: loss, running metrics, the task."""

from .metrics import RunningMetrics
from .task import ImageTask, task_loss

__all__ = ["ImageTask", "RunningMetrics", "task_loss"]
