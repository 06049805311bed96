"""Relative terms as a FlexAttention ``score_mod`` (``torch.nn.attention.flex_attention``).

The per-bucket scores (contextual terms as (B, heads, N, K) tables computed once by a matmul,
biases as (heads, K) tables) are gathered inside the fused kernel at every (query, key) pair, so
no (B, heads, N, N) tensor is built. An additive mask (Swin's shifted windows and padding) is
read in the same ``score_mod``. FlexAttention runs forward on CPU (inference) and forward and
backward on CUDA, where it is compiled once per process; it has no term on values, no attention
dropout and returns no weights (the kernel's policy falls back where one is asked). Its compiled
kernel multiplies tiles with ``tl.dot``, which needs a head width of at least 16, and takes powers
of two only: narrower or odd heads are padded with zero channels, which change no logit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention as _flex_attention

__all__ = ["score_mod", "flex_attention"]


def _index(t: torch.Tensor, b, h, i) -> torch.Tensor:
    """t[b, h, i] with size-1 leading axes read at 0 (broadcast)."""
    return t[b if t.shape[0] > 1 else 0, h if t.shape[1] > 1 else 0, i if t.shape[2] > 1 else 0]


def score_mod(
    ids: torch.Tensor | None,
    row: torch.Tensor | None,
    col: torch.Tensor | None,
    bias: torch.Tensor | None,
) -> Callable | None:
    """score + sum_m R[b, h, i, I_m(i, j)] + sum_m C[b, h, j, I_m(i, j)] + bias[b, h, i, j], or None.

    ``row``, ``col`` are 4-D (B or 1, heads or 1, N or 1, K); ``bias`` 4-D (B or 1, heads or 1, N, N).
    """
    if row is None and col is None and bias is None:
        return None
    maps = () if ids is None else (ids if ids.ndim == 3 else ids.unsqueeze(0))

    def mod(score, b, h, q_idx, kv_idx):
        for m in range(len(maps)):
            bucket = maps[m][q_idx, kv_idx]
            if row is not None:
                score = score + _index(row, b, h, q_idx)[bucket]
            if col is not None:
                score = score + _index(col, b, h, kv_idx)[bucket]
        if bias is not None:
            score = score + _index(bias, b, h, q_idx)[kv_idx]
        return score

    return mod


def head_width(d: int) -> int:
    """The head width FlexAttention computes with for heads of width ``d``: a power of two, at least 16."""
    return max(16, 1 << (d - 1).bit_length())


@functools.cache
def _compiled() -> Callable:
    return torch.compile(_flex_attention, dynamic=False)


def flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mod: Callable | None, scale: float
) -> torch.Tensor:
    """FlexAttention of (B, heads, N, d) inputs with ``mod``: compiled on CUDA, eager elsewhere."""
    if not torch.is_grad_enabled():  # FlexAttention checks requires_grad, not the grad mode
        q, k, v = q.detach(), k.detach(), v.detach()
    d = q.shape[-1]
    if head_width(d) != d:  # zero channels: the same logits, and output channels that are cut off
        q, k, v = (F.pad(x, (0, head_width(d) - d)) for x in (q, k, v))
    if q.is_cuda and not torch.compiler.is_compiling():
        out = _compiled()(q, k, v, score_mod=mod, scale=scale)
    else:
        out = _flex_attention(q, k, v, score_mod=mod, scale=scale)
    return out[..., :d]
