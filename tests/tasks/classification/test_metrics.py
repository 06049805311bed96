"""Running metrics against direct computations and scikit-learn."""

import pytest
import torch
from sklearn.metrics import r2_score

from vitpos.tasks.classification import RunningMetrics


def test_r2_over_batches_matches_sklearn():
    y, pred = torch.randn(100, 2) * torch.tensor([3.0, 0.5]) + 1.0, torch.randn(100, 2)
    pred = 0.7 * y + 0.3 * pred
    m = RunningMetrics("regression", 2)
    for i in range(0, 100, 32):  # uneven last batch
        m.add_predictions(pred[i : i + 32], y[i : i + 32])
    assert m.compute()["r2"] == pytest.approx(r2_score(y.numpy(), pred.numpy()), abs=1e-6)
    single = RunningMetrics("regression", 1)
    single.add_predictions(pred[:, :1], y[:, :1])
    assert single.compute()["r2"] == pytest.approx(r2_score(y[:, 0].numpy(), pred[:, 0].numpy()), abs=1e-6)


def test_predicting_the_mean_scores_zero():
    y = torch.randn(50, 2)
    m = RunningMetrics("regression", 2)
    m.add_predictions(y.mean(0).expand(50, 2), y)
    assert m.compute()["r2"] == pytest.approx(0.0, abs=1e-6)


def test_top1_top5_and_loss():
    logits = torch.randn(40, 8)
    labels = torch.randint(8, (40,))
    m = RunningMetrics("classification", 8)
    for chunk in range(0, 40, 16):
        m.add_predictions(logits[chunk : chunk + 16], labels[chunk : chunk + 16])
    m.add_loss(torch.tensor(2.0), 10)
    m.add_loss(torch.tensor(1.0), 30)
    top5 = logits.topk(5, dim=-1).indices
    out = m.compute()
    assert out["acc1"] == pytest.approx(100 * (logits.argmax(-1) == labels).float().mean().item())
    assert out["acc5"] == pytest.approx(100 * (top5 == labels[:, None]).any(-1).float().mean().item())
    assert out["loss"] == pytest.approx(1.25)


def test_no_top5_with_five_classes_or_fewer_and_state_round_trip():
    m = RunningMetrics("classification", 2)
    m.add_predictions(torch.tensor([[2.0, 1.0], [0.0, 1.0]]), torch.tensor([0, 0]))
    assert m.compute() == {"acc1": 50.0}
    restored = RunningMetrics("classification", 2)
    restored.load_state(m.state())
    assert restored.compute() == m.compute()
