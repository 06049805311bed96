"""Hard distillation through DeiT's distillation token (Touvron et al. 2021, §5.2, Eq. 3).

The student (a model with ``distilled=True``) and a frozen teacher see the same augmented images;
the class head learns the true labels and the distillation head the teacher's argmax labels,
each loss weighted 1/2. The teacher is a checkpoint (a vitpos run or checkpoint, or a released
file of any layout vitpos loads) or a preset with released weights; its classes must be the
student's. At inference the student averages its two heads (:meth:`PyramidTransformer.forward_head`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..models.pyramid import PyramidTransformer
from ..tasks.base import Task
from ..weights import create_model
from ..weights.pretrained import names_release

__all__ = ["DistilledOutputs", "Distiller", "load_teacher", "training_loss"]


class DistilledOutputs(NamedTuple):
    """What a :class:`Distiller` returns for a training batch."""

    logits: torch.Tensor
    """The class head's logits (B, classes)."""
    dist_logits: torch.Tensor
    """The distillation head's logits (B, classes)."""
    teacher_logits: torch.Tensor
    """The teacher's logits (B, classes), without gradient."""


class Distiller(nn.Module):
    """A distilled student and its frozen teacher; the training step runs this instead of the student."""

    def __init__(self, student: nn.Module, teacher: nn.Module) -> None:
        super().__init__()
        if not isinstance(student, PyramidTransformer) or student.head_dist is None:
            raise ConfigError(
                "teacher needs a student with a distillation token: build the model with distilled=True "
                "(the deit_*_distilled_* presets)"
            )
        self.student: PyramidTransformer = student
        self.teacher = teacher.eval().requires_grad_(False)

    def forward(self, x: torch.Tensor, **inputs: torch.Tensor) -> DistilledOutputs:
        """``inputs``: further model inputs (a ``padding_mask``), given to the student and the teacher."""
        logits, dist_logits = self.student.distilled_logits(self.student.forward_tokens(x, **inputs))
        with torch.no_grad():
            teacher_logits = self.teacher(x, **inputs)
        return DistilledOutputs(logits, dist_logits, teacher_logits)


def load_teacher(spec: str, num_classes: int, device: torch.device) -> nn.Module:
    """The teacher named by ``spec`` (a checkpoint path, its URL, or a preset with released weights), in eval mode."""
    teacher = create_model(spec if names_release(spec) else None, checkpoint=spec)
    classes = getattr(teacher, "num_classes", None)
    if classes != num_classes:
        raise ConfigError(
            f"teacher {spec!r} predicts {classes} classes, the student {num_classes}; "
            "give a teacher trained on the student's classes"
        )
    return teacher.to(device).eval()


def training_loss(outputs: Any, targets: torch.Tensor, task: Task, label_smoothing: float) -> tuple[torch.Tensor, Any]:
    """(loss, predictions): the task's loss of ``outputs``, or for a :class:`Distiller`'s outputs hard
    distillation's, 1/2 the class head's task loss plus 1/2 the distillation head's cross-entropy with
    the teacher's argmax, and the two heads' mean logits as predictions."""
    if not isinstance(outputs, DistilledOutputs):
        return task.loss(outputs, targets, label_smoothing), outputs
    base = task.loss(outputs.logits, targets, label_smoothing)
    distillation = F.cross_entropy(outputs.dist_logits, outputs.teacher_logits.argmax(dim=-1))
    return (base + distillation) / 2, (outputs.logits + outputs.dist_logits) / 2
