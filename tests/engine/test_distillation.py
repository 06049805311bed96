"""Hard distillation (DeiT): the loss is Eq. 3, a teacher checkpoint trains a distilled student end to end."""

import pytest
import torch
import torch.nn.functional as F

import vitpos
from vitpos.data.dataset import DataInfo
from vitpos.engine import RunRequest, train
from vitpos.engine.distillation import DistilledOutputs, training_loss
from vitpos.tasks.classification.task import ImageTask
from vitpos.weights import write_checkpoint

from .conftest import tiny_request

STUDENT = dict(
    img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2, distilled=True, head="cls", absolute="sincos2d"
)


def test_hard_distillation_is_half_the_label_loss_and_half_the_teachers_argmax():
    gen = torch.Generator().manual_seed(0)
    logits, dist_logits, teacher = (torch.randn(6, 4, generator=gen) for _ in range(3))
    targets = torch.randint(0, 4, (6,), generator=gen)
    task = ImageTask(DataInfo("four", "classification", classes=("a", "b", "c", "d")))
    loss, predictions = training_loss(DistilledOutputs(logits, dist_logits, teacher), targets, task, 0.1)
    expected = (
        F.cross_entropy(logits, targets, label_smoothing=0.1) / 2 + F.cross_entropy(dist_logits, teacher.argmax(-1)) / 2
    )
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(predictions, (logits + dist_logits) / 2)


def test_a_teacher_checkpoint_distils_into_the_student(tmp_path):
    teacher = train(*tiny_request(n=128, epochs=1, run_dir=str(tmp_path / "teacher")).resolve())
    assert teacher.checkpoint is not None
    request = RunRequest(
        "deit_tiny_distilled_patch16_224",
        STUDENT,
        {"data": "synthetic:direction:img=16:train=128:val=64:test=64", "epochs": 2, "batch_size": 32,
         "lr": 3e-3, "warmup_epochs": 0, "progress": False, "teacher": str(teacher.checkpoint)},
    )  # fmt: skip
    before = vitpos.create_model("deit_tiny_distilled_patch16_224", **STUDENT, num_classes=2)
    result = train(*request.resolve())
    trained = dict(result.model.named_parameters())
    assert not torch.equal(before.head_dist.weight, trained["head_dist.weight"].detach())
    assert not torch.equal(before.dist_token, trained["dist_token"].detach())
    assert "acc1" in result.test and torch.isfinite(torch.tensor(result.history[-1]["train_loss"]))


def test_a_student_without_a_distillation_token_is_refused(tmp_path):
    teacher = train(*tiny_request(n=64, epochs=1, run_dir=str(tmp_path / "teacher")).resolve())
    with pytest.raises(vitpos.ConfigError, match="needs a student with a distillation token"):
        train(*tiny_request(n=64, epochs=1, teacher=str(teacher.checkpoint)).resolve())


def test_a_teacher_of_other_classes_is_refused(tmp_path):
    teacher = vitpos.create_model("thesis_vit", num_classes=5)
    path = tmp_path / "teacher"
    write_checkpoint(teacher, path)
    with pytest.raises(vitpos.ConfigError, match="predicts 5 classes, the student 2"):
        train(*tiny_request(n=64, epochs=1, model=STUDENT, teacher=str(path)).resolve())


def test_a_preset_without_released_weights_is_no_teacher():
    with pytest.raises(vitpos.CheckpointError, match="has no released weights"):
        train(*tiny_request(n=64, epochs=1, model=STUDENT, teacher="thesis_vit").resolve())
