"""Sequence pooling (Hassani et al. 2021, Compact Transformers §3): an attention-weighted mean of the tokens."""

from __future__ import annotations

import torch
from torch import nn

from .layers import init_linear

__all__ = ["SequencePool"]


class SequencePool(nn.Module):
    """Tokens (B, N, D) -> softmax over N of a learned linear score, times the tokens -> (B, D)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = init_linear(nn.Linear(dim, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, N, D -> B, D
        weights = self.score(x).softmax(dim=1)  # B, N, 1
        return (weights.transpose(1, 2) @ x).squeeze(1)
