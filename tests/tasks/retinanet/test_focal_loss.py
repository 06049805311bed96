"""The focal loss against eq. 5 of Lin et al. written out element by element."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from vitpos.tasks.retinanet import sigmoid_focal_loss


@pytest.mark.parametrize("alpha, gamma", [(0.25, 2.0), (0.5, 0.0), (0.75, 1.0)])
def test_focal_loss_is_the_papers_formula(alpha: float, gamma: float) -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, generator=g, dtype=torch.float64) * 3
    targets = (torch.rand(7, 5, generator=g) > 0.7).double()
    expected = 0.0
    for x, t in zip(logits.flatten().tolist(), targets.flatten().tolist(), strict=True):
        p = 1 / (1 + math.exp(-x))
        p_t, alpha_t = (p, alpha) if t == 1 else (1 - p, 1 - alpha)
        expected += -alpha_t * (1 - p_t) ** gamma * math.log(p_t)
    assert math.isclose(float(sigmoid_focal_loss(logits, targets, alpha, gamma)), expected, rel_tol=1e-10)


def test_gamma_zero_is_weighted_cross_entropy_and_large_logits_stay_finite() -> None:
    logits = torch.tensor([[-200.0, 200.0, 0.3]])
    targets = torch.tensor([[1.0, 0.0, 1.0]])
    loss = sigmoid_focal_loss(logits, targets, 0.25, 2.0)
    assert torch.isfinite(loss)
    weights = torch.tensor([[0.25, 0.75, 0.25]])
    bce = F.binary_cross_entropy_with_logits(logits, targets, weight=weights, reduction="sum")
    torch.testing.assert_close(sigmoid_focal_loss(logits, targets, 0.25, 0.0), bce)
