"""Sequence pooling (Hassani et al. 2021, Compact Transformers §3): an attention-weighted mean of the tokens."""

from __future__ import annotations

import torch
from torch import nn

from .layers import init_linear

__all__ = ["SequencePool"]


class SequencePool(nn.Module):
    """Tokens (B, N, D) -> softmax over N of a learned linear score, times the tokens -> (B, D).

    ``padded`` (B, N), True at padded tokens, leaves those out of the softmax.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = init_linear(nn.Linear(dim, 1))

    def forward(self, x: torch.Tensor, padded: torch.Tensor | None = None) -> torch.Tensor:  # B, N, D -> B, D
        scores = self.score(x)  # B, N, 1
        if padded is not None:
            scores = scores.masked_fill(padded[..., None], float("-inf"))
        weights = scores.softmax(dim=1)
        return (weights.transpose(1, 2) @ x).squeeze(1)
