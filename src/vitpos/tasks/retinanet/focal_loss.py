"""The focal loss (Lin et al., ICCV 2017, eq. 5), on sigmoid outputs as RetinaNet uses it.

FL(p_t) = -alpha_t (1 - p_t)^gamma log(p_t), with p_t = p for a positive target and 1 - p for a
negative one, alpha_t = alpha and 1 - alpha likewise; alpha = 0.25 and gamma = 2 are the paper's
choice. log(p_t) is computed from the logits (a binary cross entropy) so it stays finite.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["sigmoid_focal_loss"]


def sigmoid_focal_loss(
    logits: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0
) -> torch.Tensor:
    """The focal loss of every element of ``logits`` against 0/1 ``targets`` of the same shape, summed."""
    p = logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * ce * (1 - p_t) ** gamma).sum()
