"""mIoU, aAcc and mAcc from a confusion matrix, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from vitpos.tasks.segmentation.metrics import SegmentationMetrics, confusion_matrix, scores

# 3 classes; 255 is ignored. Pixels (true, predicted):
TARGET = torch.tensor([[0, 0, 0, 1], [1, 1, 2, 255]])
PRED = torch.tensor([[0, 0, 1, 1], [1, 2, 2, 0]])
# class 0: true 3 (pred 0,0,1) -> TP 2, FN 1, FP 0           IoU 2/3
# class 1: true 3 (pred 1,1,2) -> TP 2, FN 1, FP 1 (a 0)     IoU 2/4
# class 2: true 1 (pred 2)     -> TP 1, FN 0, FP 1 (a 1)     IoU 1/2
MATRIX = [[2, 1, 0], [0, 2, 1], [0, 0, 1]]


def test_confusion_matrix_by_hand() -> None:
    assert confusion_matrix(PRED, TARGET, 3).tolist() == MATRIX


def test_scores_by_hand() -> None:
    out = scores(torch.tensor(MATRIX))
    assert out["miou"] == pytest.approx(100 * (2 / 3 + 1 / 2 + 1 / 2) / 3)
    assert out["aacc"] == pytest.approx(100 * 5 / 7)
    assert out["macc"] == pytest.approx(100 * (2 / 3 + 2 / 3 + 1) / 3)


def test_a_class_absent_from_labels_and_predictions_is_skipped() -> None:
    matrix = torch.zeros(4, 4, dtype=torch.int64)
    matrix[:3, :3] = torch.tensor(MATRIX)
    assert scores(matrix)["miou"] == pytest.approx(100 * (2 / 3 + 1 / 2 + 1 / 2) / 3)
    matrix[3, 0] = 1  # now present in the labels and never found: IoU 0, and class 0 gains a false positive
    assert scores(matrix)["miou"] == pytest.approx(100 * (2 / 4 + 1 / 2 + 1 / 2 + 0) / 4)


def test_labels_outside_the_classes_are_an_error() -> None:
    with pytest.raises(ValueError, match="label 7 is outside the 3 classes"):
        confusion_matrix(PRED, torch.where(TARGET == 2, 7, TARGET), 3)


def test_running_metrics_add_up_batches_and_restore_their_state() -> None:
    logits = torch.nn.functional.one_hot(PRED, 3).permute(2, 0, 1).float()  # (3, 2, 4) -> a batch of one image each row
    running = SegmentationMetrics(3)
    for row in range(2):
        running.add_predictions(logits[:, row : row + 1].unsqueeze(0), TARGET[row : row + 1].unsqueeze(0))
        running.add_loss(torch.tensor(float(row + 1)), 1)
    out = running.compute()
    assert out["loss"] == pytest.approx(1.5)
    assert out["miou"] == pytest.approx(scores(torch.tensor(MATRIX))["miou"])
    again = SegmentationMetrics(3)
    again.load_state(running.state())
    assert again.compute() == out
