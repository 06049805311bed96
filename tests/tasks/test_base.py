"""The task registry: one kind per data task, found by name, matched to what a model predicts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.data.dataset import DataInfo
from vitpos.engine.distributed import Dist
from vitpos.errors import VitposError
from vitpos.registry import TASKS, UnknownNameError
from vitpos.tasks import primary_metric, task_for, task_kind
from vitpos.tasks.base import model_task
from vitpos.tasks.classification import ImageTask
from vitpos.tasks.detection import DetectionTask
from vitpos.tasks.segmentation import SegmentationTask

from ..conftest import TINY, TINY_PVT


def test_every_data_task_has_a_kind_whose_metrics_report_its_headline():
    info = DataInfo("made-up", "classification", classes=("a", "b", "c"))
    metrics = task_for(info, vitpos.create_model("thesis_vit", num_classes=3)).metrics("cpu")
    metrics.add_loss(torch.tensor(0.5), 4)
    metrics.add_predictions(torch.eye(3)[[0, 1, 2, 0]], torch.tensor([0, 1, 2, 1]))
    assert metrics.compute()[primary_metric("classification")] == pytest.approx(75.0)
    assert TASKS.names() == ["classification", "detection", "regression", "segmentation"]
    assert [primary_metric(name) for name in TASKS.names()] == ["acc1", "AP", "r2", "miou"]


def test_each_model_gets_its_tasks_loss_and_metrics():
    cases = [
        ("classification", vitpos.create_model("thesis_vit", **TINY), ImageTask),
        ("detection", vitpos.create_model("detr_tiny_sine"), DetectionTask),
        ("segmentation", vitpos.create_model("pvt_tiny_fpn", **{**TINY_PVT, "arch": "semantic_fpn"}), SegmentationTask),
    ]
    for task, model, expected in cases:
        assert model_task(model) == task
        assert isinstance(task_for(DataInfo("made-up", task, classes=("a", "b")), model), expected)


def test_a_model_of_another_task_is_refused_with_the_fix():
    segmenter = vitpos.create_model("pvt_tiny_fpn", **{**TINY_PVT, "arch": "semantic_fpn"})
    with pytest.raises(VitposError, match=r"is a detection task, but the model .* is a segmenter; use segmentation"):
        task_for(DataInfo("made-up", "detection", classes=("a",)), segmenter)
    with pytest.raises(VitposError, match=r"is a regression task, but the model .* is a detector; use detection data"):
        task_for(DataInfo("made-up", "regression", target_names=("dx",)), vitpos.create_model("detr_tiny_sine"))
    with pytest.raises(UnknownNameError, match="unknown task 'depth'; valid values: classification, detection"):
        task_kind("depth")


def test_metrics_sum_over_the_processes_they_are_given():
    info = DataInfo("made-up", "segmentation", classes=("a", "b"))
    metrics = SegmentationTask(info).metrics("cpu")
    metrics.add_predictions(torch.tensor([[[[2.0, 0.0]], [[0.0, 1.0]]]]), torch.tensor([[[0, 0]]]))

    class Twice(Dist):
        def sum(self, tensor):
            return tensor * 2

    assert metrics.reduced(Twice()).state()[2:] == [2.0, 2.0, 0.0, 0.0]  # pixels (0 as 0), (0 as 1), counted twice
    assert metrics.reduced(Dist()).state() == metrics.state()
    assert Dist().gather([1, 2]) == [1, 2]


@pytest.mark.parametrize("preset", ["detr_tiny_sine", "pvt_tiny_fpn"])
def test_a_saved_detector_or_segmenter_config_loads_where_only_the_factory_was_imported(preset, tmp_path: Path):
    saved = vitpos.get_config(preset).to_dict()
    script = (
        "import sys, json; from vitpos.models.factory import config_from_dict; "
        "cfg = config_from_dict(json.loads(sys.argv[1])); print(type(cfg).__name__, cfg.task)"
    )
    src = str(Path(vitpos.__file__).parents[1])
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(saved)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": src, "PATH": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [type(vitpos.get_config(preset)).__name__, vitpos.get_config(preset).task]
