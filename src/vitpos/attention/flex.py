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
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention as _flex_attention

from ..compile_cache import compile_privately
from .terms import RelativeTerms, bucket_maps

__all__ = ["score_mod", "gathered_bias", "flex_attention"]


def _squeezed(t: torch.Tensor, axes: int) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``t`` without its size-1 axes among the first ``axes`` (read at 0: broadcast), and the kept axes."""
    kept = tuple(a for a in range(axes) if t.shape[a] > 1)
    return t.squeeze(tuple(a for a in range(axes) if a not in kept)), kept


def _gather(t: torch.Tensor, kept: tuple[int, ...], at: tuple, *last) -> torch.Tensor:
    """``t`` read at the kept axes' positions ``at`` and ``last``: one indexing operation."""
    index = tuple(at[a] for a in kept) + last
    return t[index] if index else t


def score_mod(
    ids: torch.Tensor | None,
    row: torch.Tensor | None,
    col: torch.Tensor | None,
    bias: torch.Tensor | None,
) -> Callable | None:
    """score + sum_m R[b, h, i, I_m(i, j)] + sum_m C[b, h, j, I_m(i, j)] + bias[b, h, i, j], or None.

    ``row``, ``col`` are 4-D (B or 1, heads or 1, N or 1, K); ``bias`` broadcastable to (B, heads, N, M).
    Inductor differentiates a captured tensor only where the ``score_mod`` indexes it once, so each
    tensor is read by one indexing operation: its size-1 axes are dropped (a bias per bucket stays a
    (heads, K) table, not a copy per query), and a second bucket map (the Cross method) reads a copy.
    """
    if row is None and col is None and bias is None:
        return None
    maps = () if ids is None else bucket_maps(ids)
    rows = [] if row is None else [_squeezed(row if m == 0 else row.clone(), 3) for m in range(len(maps))]
    cols = [] if col is None else [_squeezed(col if m == 0 else col.clone(), 3) for m in range(len(maps))]
    dense = None if bias is None else _squeezed(bias[(None,) * (4 - bias.ndim)], 4)

    def mod(score, b, h, q_idx, kv_idx):
        for m, id_map in enumerate(maps):
            bucket = id_map[q_idx, kv_idx]
            if rows:
                score = score + _gather(*rows[m], (b, h, q_idx), bucket)
            if cols:
                score = score + _gather(*cols[m], (b, h, kv_idx), bucket)
        if dense is not None:
            score = score + _gather(*dense, (b, h, q_idx, kv_idx))
        return score

    return mod


def gathered_bias(terms: RelativeTerms) -> RelativeTerms:
    """``terms`` with the bias per bucket gathered into the dense bias: a batch-free (heads or 1, N, N)
    tensor that the ``score_mod`` reads at (h, i, j) once, so no pair reads a table shared by the
    others; the contextual tables, which differ per image, are still read per pair."""
    if terms.bias_table is None:
        return terms
    gathered = replace(terms, key_table=None, query_table=None, value_table=None, bias=None).logits(None, None, 1.0)
    assert gathered is not None  # a bias table is set
    dense = gathered[0] if terms.bias is None else gathered[0] + terms.bias
    return replace(terms, bias_table=None, bias=dense)


def head_width(d: int) -> int:
    """The head width FlexAttention computes with for heads of width ``d``: a power of two, at least 16."""
    return max(16, 1 << (d - 1).bit_length())


COMPILED_ON = {"cuda"}
"""Device types on which FlexAttention runs compiled. A benchmark may add ``"cpu"`` to time the compiled
forward there (Inductor compiles it; FlexAttention has no CPU backward)."""


@functools.cache
def _compiled() -> Callable:
    return compile_privately(_flex_attention, dynamic=False)


def flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mod: Callable | None, scale: float
) -> torch.Tensor:
    """FlexAttention of (B, heads, N, d) inputs with ``mod``: compiled on CUDA (:data:`COMPILED_ON`), else eager."""
    if not torch.is_grad_enabled():  # FlexAttention checks requires_grad, not the grad mode
        q, k, v = q.detach(), k.detach(), v.detach()
    d = q.shape[-1]
    if head_width(d) != d:  # zero channels: the same logits, and output channels that are cut off
        q, k, v = (F.pad(x, (0, head_width(d) - d)) for x in (q, k, v))
    if q.device.type in COMPILED_ON and not torch.compiler.is_compiling():
        out = _compiled()(q, k, v, score_mod=mod, scale=scale)
    else:
        out = _flex_attention(q, k, v, score_mod=mod, scale=scale)
    return out[..., :d]
