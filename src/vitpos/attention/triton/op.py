"""The fused attention as a ``torch.library`` custom operator pair, so ``torch.compile`` keeps one graph.

``vitpos::fused_attention`` (forward: out, log-sum-exp, weights per bucket) and
``vitpos::fused_attention_backward`` (dq, dk, dv and the score gradients), each with a fake
kernel giving the real shapes and strides (new contiguous tensors), tied by
``torch.library.register_autograd``. Both run the Triton kernels (:mod:`.launch`) on CUDA and,
when ``TRITON_INTERPRET=1``, on CPU tensors; elsewhere the same arithmetic in PyTorch
(:mod:`.reference`). Triton is imported on the first kernel launch, never before.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import torch
from torch import Tensor

from . import reference

__all__ = ["SCORE_GRADS", "available", "runs_kernels", "fused_attention"]

SCORE_GRADS = ("atomic", "stored")
"""How the fused backward sums score gradients per bucket: ``atomic``, one float32 atomic per (query,
key) pair into its bucket (:mod:`.kernels`); ``stored``, every score gradient stored once and
reduced by matmuls against the one-hot bucket map (:mod:`.score_grads`), no atomic at all."""


_INSTALLED = importlib.util.find_spec("triton") is not None


def available() -> bool:
    """True if Triton is installed (checked once, without importing it)."""
    return _INSTALLED


def runs_kernels(device: torch.device) -> bool:
    """True if the operator runs the Triton kernels on ``device`` (CUDA, or CPU under the interpreter)."""
    interpret = device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
    return (device.type == "cuda" or interpret) and available()


def _impl(device: torch.device) -> ModuleType:
    if runs_kernels(device):
        from . import launch  # imports triton

        return launch
    return reference


@torch.library.custom_op("vitpos::fused_attention", mutates_args=())
def _forward(
    q: Tensor, k: Tensor, v: Tensor, ids: Tensor | None, row: Tensor | None, col: Tensor | None,
    bias: Tensor | None, scale: float, num_buckets: int, value_term: bool, config: list[int], stored: bool,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    return _impl(q.device).forward(q, k, v, ids, row, col, bias, scale, num_buckets, value_term, config)


@_forward.register_fake
def _(q, k, v, ids, row, col, bias, scale, num_buckets, value_term, config, stored):
    b, h, n, d = q.shape
    weights = (b, h, n, num_buckets) if value_term else (0,)
    stats = reference.stats_dtype(q.dtype)
    return q.new_empty(b, h, n, d), q.new_empty(b, h, n, dtype=stats), q.new_empty(weights, dtype=stats)


@torch.library.custom_op("vitpos::fused_attention_backward", mutates_args=())
def _backward(
    grad_out: Tensor, grad_weights: Tensor | None, q: Tensor, k: Tensor, v: Tensor, ids: Tensor | None,
    row: Tensor | None, col: Tensor | None, bias: Tensor | None, out: Tensor, lse: Tensor, weights: Tensor,
    scale: float, num_buckets: int, grads: list[bool], config: list[int], stored: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    return _impl(q.device).backward(
        grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, scale, num_buckets, grads, config,
        stored,
    )  # fmt: skip


@_backward.register_fake
def _(grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, scale, num_buckets, grads, config,
      stored):  # fmt: skip
    def like(t: Tensor | None, wanted: bool) -> Tensor:
        return t.new_empty(t.shape) if t is not None and wanted else q.new_empty(0)

    rest = (like(t, wanted) for t, wanted in zip((row, col, bias), grads, strict=True))
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), *rest


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, ids, row, col, bias, scale, num_buckets, value_term, config, stored = inputs
    out, lse, weights = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, ids, row, col, bias, out, lse, weights)
    ctx.scale, ctx.num_buckets, ctx.value_term, ctx.config, ctx.stored = scale, num_buckets, value_term, config, stored


def _backward_rule(ctx, grad_out, grad_lse, grad_weights):
    q, k, v, ids, row, col, bias, out, lse, weights = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    if not ctx.value_term:
        grad_weights = None
    elif grad_weights is None:
        grad_weights = torch.zeros_like(weights)
    grads = [bool(wanted) for wanted in ctx.needs_input_grad[4:7]]
    dq, dk, dv, d_row, d_col, d_bias = _backward(
        grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, ctx.scale, ctx.num_buckets, grads,
        ctx.config, ctx.stored,
    )  # fmt: skip
    d_row, d_col, d_bias = (g if wanted else None for g, wanted in zip((d_row, d_col, d_bias), grads, strict=True))
    return dq, dk, dv, None, d_row, d_col, d_bias, None, None, None, None, None


torch.library.register_autograd("vitpos::fused_attention", _backward_rule, setup_context=_setup_context)


def _broadcasts(shape: torch.Size, to: tuple[int, ...]) -> bool:
    try:
        return torch.broadcast_shapes(shape, to) == to
    except RuntimeError:
        return False


def _check(q, k, v, ids, num_buckets, row, col, bias, bucket_weights) -> None:
    """Raise a ValueError naming the input whose shape the fused attention cannot take."""
    if q.ndim != 4 or k.shape != v.shape or k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"fused attention takes q (B, heads, N, d) and k, v (B, heads, M, d), got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    (b, h, n, _), m = q.shape, k.shape[-2]
    if ids is None:
        if row is not None or col is not None or bucket_weights:
            raise ValueError("row_scores, col_scores and bucket_weights are looked up by bucket id: pass ids")
    elif ids.shape[-2:] != (n, m) or ids.ndim not in (2, 3) or (ids.ndim == 3 and ids.shape[0] != 2):
        raise ValueError(f"ids must be ({n}, {m}) or (2, {n}, {m}) for these queries and keys, got {tuple(ids.shape)}")
    for name, scores, rows in (("row_scores", row, (1, n)), ("col_scores", col, (m,))):
        if scores is not None and (
            scores.ndim != 4 or scores.shape[-1] != num_buckets or scores.shape[-2] not in rows
            or scores.shape[0] not in (1, b) or scores.shape[1] not in (1, h)
        ):  # fmt: skip
            raise ValueError(
                f"{name} must be (B or 1, heads or 1, {' or '.join(map(str, rows))}, {num_buckets}), "
                f"got {tuple(scores.shape)}"
            )
    if bias is not None and (bias.ndim > 4 or not _broadcasts(bias.shape, (b, h, n, m))):
        raise ValueError(f"bias must broadcast to (B, heads, N, M) = {(b, h, n, m)}, got {tuple(bias.shape)}")


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float,
    ids: Tensor | None = None,
    *,
    num_buckets: int = 0,
    row_scores: Tensor | None = None,
    col_scores: Tensor | None = None,
    bias: Tensor | None = None,
    bucket_weights: bool = False,
    config: tuple[int, int] | None = None,
    score_grads: str = "atomic",
) -> tuple[Tensor, Tensor | None]:
    """Attention with bucketed terms in one fused operator; (out, weights per bucket or None).

    The arguments are those of :func:`vitpos.attention.bucketed.bucketed_attention` (``bias``:
    additive logits broadcastable to (B, heads, N, M), masks included, with or without gradient). ``config``
    (BLOCK_M, BLOCK_N) fixes the tiles instead of the device's choice. ``score_grads``: how the
    backward sums the score gradients into the tables' and the bias's gradients (:data:`SCORE_GRADS`).
    The per-bucket weights are returned in q's dtype.
    """
    if score_grads not in SCORE_GRADS:
        raise ValueError(f"score_grads must be one of {', '.join(SCORE_GRADS)}, got {score_grads!r}")
    _check(q, k, v, ids, num_buckets, row_scores, col_scores, bias, bucket_weights)
    if bias is not None:  # 4-D, a column per key (its gradient buffer has unit column stride)
        bias = bias[(None,) * (4 - bias.ndim)]
        bias = bias.expand(*bias.shape[:-1], k.shape[-2])
    out, _, weights = torch.ops.vitpos.fused_attention(
        q, k, v, ids, row_scores, col_scores, bias, scale, num_buckets, bucket_weights, list(config or ()),
        score_grads == "stored",
    )  # fmt: skip
    return out, weights.to(q.dtype) if bucket_weights else None
