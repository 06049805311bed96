"""The fused operator's arithmetic in PyTorch: what it runs where the Triton kernels do not.

The same inputs and outputs as :mod:`.launch` (log-sum-exp and per-bucket weights at least float32),
computed with the bucket lookups of :mod:`..bucket_lookup` on whole (B, heads, N, M) tensors,
in float32 for bf16 / fp16 inputs.
"""

from __future__ import annotations

import torch

from ..bucket_lookup import BucketIndex, add_at, lookup

__all__ = ["stats_dtype", "forward", "backward"]


def stats_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the log-sum-exp and the per-bucket weights and gradients: at least float32."""
    return torch.promote_types(dtype, torch.float32)


def _logits(q, k, ids, row, col, bias, scale: float, num_buckets: int) -> tuple[torch.Tensor, BucketIndex | None]:
    acc = stats_dtype(q.dtype)
    s = (q.to(acc) @ k.to(acc).transpose(-2, -1)) * scale
    index = None if ids is None else BucketIndex(ids.long(), num_buckets)
    every, m = slice(None), k.shape[-2]
    if row is not None:
        assert index is not None  # the operator checked that row scores come with ids
        s = s + lookup(row.to(acc), index.rows(every, per_query=row.shape[-2] != 1), m)
    if col is not None:
        assert index is not None
        s = s + lookup(col.to(acc), index.columns(every), m)
    if bias is not None:
        s = s + bias.to(acc)
    return s, index


def _per_bucket(values: torch.Tensor, like: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """values (B, heads, N, M) summed onto a gradient (at least float32) shaped like ``like`` (..., N or 1, K)."""
    target = like.new_zeros(like.shape, dtype=stats_dtype(like.dtype))
    return add_at(target, index, values.sum_to_size(*like.shape[:-2], *values.shape[-2:]))


def forward(q, k, v, ids, row, col, bias, scale: float, num_buckets: int, value_term: bool, config: list[int]):
    """(out, log-sum-exp, per-bucket weights or an empty tensor), as :func:`.launch.forward`."""
    s, index = _logits(q, k, ids, row, col, bias, scale, num_buckets)
    lse = s.logsumexp(-1)
    p = (s - lse[..., None]).exp()
    out = (p @ v.to(p.dtype)).to(q.dtype).contiguous()
    weights = p.new_zeros(0)
    if value_term:
        assert index is not None
        weights = add_at(p.new_zeros(*p.shape[:-1], num_buckets), index.rows(slice(None)), p)
    return out, lse, weights


def backward(
    grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, scale, num_buckets, grads, config,
    stored=False,
):  # fmt: skip
    """(dq, dk, dv, d_row, d_col, d_bias), as :func:`.launch.backward` (for either ``stored`` variant)."""
    s, index = _logits(q, k, ids, row, col, bias, scale, num_buckets)
    p = (s - lse[..., None].to(s.dtype)).exp()
    g = grad_out.to(p.dtype)
    dp = g @ v.to(p.dtype).transpose(-2, -1)
    if grad_weights is not None:
        assert index is not None
        dp = dp + lookup(grad_weights.to(p.dtype), index.rows(slice(None)), k.shape[-2])
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    dq = (ds @ k.to(p.dtype) * scale).to(q.dtype)
    dk = (ds.transpose(-2, -1) @ q.to(p.dtype) * scale).to(k.dtype)
    dv = (p.transpose(-2, -1) @ g).to(v.dtype)
    d_row, d_col, d_bias = (q.new_empty(0) for _ in range(3))  # three tensors: outputs may not alias
    if row is not None and grads[0]:
        assert index is not None
        d_row = _per_bucket(ds, row, index.rows(slice(None), per_query=row.shape[-2] != 1)).to(row.dtype)
    if col is not None and grads[1]:
        assert index is not None
        d_col = _per_bucket(ds, col, index.columns(slice(None))).to(col.dtype)
    if bias is not None and grads[2]:
        d_bias = ds.sum_to_size(bias.shape).to(bias.dtype).contiguous()
    return dq.contiguous(), dk.contiguous(), dv.contiguous(), d_row, d_col, d_bias
