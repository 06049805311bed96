"""The ``stored`` and ``chunked`` paths: attention with bucketed relative terms, computed without
autograd's N x N bookkeeping.

    out_i = sum_j alpha_ij v_j,  alpha_i = softmax_j(scale q_i . k_j + L_ij),
    L_ij  = sum_m R[i, I_m(i, j)] + sum_m C[j, I_m(i, j)] + bias_ij

``R`` (row scores, e.g. scale q . P_K^T, or a per-bucket bias) is looked up per query and ``C``
(column scores, e.g. scale k . P_Q^T) per key; I_m are the bucket-id maps (one, or two for the
Cross method, summed). The value term sum_j alpha_ij p_{I(i,j)} is returned as bucket weights
W_iK = sum_{j: I(i,j)=K} alpha_ij (B, heads, N, K) that the caller multiplies by its value
table, so every product with a table stays in ordinary autograd. No tensor of size N x N x d
is ever built.

Two modes, the same arithmetic:

* ``stored`` keeps the (B, heads, N, N) weights for backward, as autograd would, but adds the
  looked-up terms in place, reduces bias gradients over the batch before adding them onto
  buckets, and skips the masked-softmax checks of ``scaled_dot_product_attention``'s math
  path (which is what a float mask that needs a gradient falls back to on CPU).
* ``chunked`` processes the queries in chunks and keeps only the inputs and the log-sum-exp of
  every row (B, heads, N, in float32); backward recomputes each chunk's weights (as
  FlashAttention does), so the largest tensors are a few (B, heads, chunk, N) at a time, at
  the price of one more q . k^T and exp per chunk.

Every input is in one dtype (the kernel casts the terms to the queries' dtype); autocast is
switched off inside, in forward and in backward, so that no operation changes it.
"""

from __future__ import annotations

import contextlib

import torch

from .bucket_lookup import BucketIndex, add_at, lookup

__all__ = ["MIN_CHUNK", "MODES", "chunk_rows", "bucketed_attention"]

MODES = ("stored", "chunked")
MIN_CHUNK = 16
"""The fewest queries per chunk: below it the per-chunk overhead outweighs the saving."""


def chunk_rows(num_tokens: int, head_dim: int) -> int:
    """Queries per chunk: ``head_dim``, so that a chunk's (B, heads, chunk, N) working tensors are
    the size of one (B, N, D) token activation whatever the batch and sequence length."""
    return max(1, min(num_tokens, max(MIN_CHUNK, head_dim)))


class _LogitInputs:
    """The inputs of one call and the logits of a chunk of queries, shared by both passes."""

    def __init__(self, q, k, row, col, bias, ids, scale: float, num_buckets: int) -> None:
        self.q, self.k, self.row, self.col, self.bias, self.scale = q, k, row, col, bias, scale
        self.buckets = None if ids is None else BucketIndex(ids, num_buckets)

    @property
    def index(self) -> BucketIndex:
        """The bucket index of the row and column scores (set wherever there are such scores)."""
        if self.buckets is None:
            raise ValueError("bucket scores need bucket ids: give ids with the row or column scores")
        return self.buckets

    def scaled_queries(self, rows: slice) -> torch.Tensor:  # B, heads, chunk, d
        """scale * q of the chunk (scaling q is cheaper than scaling the logits)."""
        return self.q[..., rows, :] * self.scale

    def logits(self, rows: slice) -> torch.Tensor:  # B, heads, chunk, N
        s = torch.matmul(self.scaled_queries(rows), self.k.transpose(-2, -1))
        n = s.shape[-1]
        if self.row is not None:
            per_query = self.row.shape[-2] != 1
            row = self.row[..., rows, :] if per_query else self.row
            s.add_(lookup(row, self.index.rows(rows, per_query), n))
        if self.col is not None:
            s.add_(lookup(self.col, self.index.columns(rows), n))
        if self.bias is not None:  # a bias with one query row (a key mask) holds for every chunk
            s.add_(self.bias if self.bias.shape[-2] == 1 else self.bias[..., rows, :])
        return s


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Sums onto buckets (hundreds of pairs each) run in float32 when the inputs are bf16 / fp16."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def _bucket_sums(values: torch.Tensor, index: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """values (..., chunk, N) summed per bucket (..., chunk, K), accumulated in float32 for bf16 / fp16."""
    acc = _accumulation_dtype(values.dtype)
    return add_at(values.new_zeros(*values.shape[:-1], num_buckets, dtype=acc), index, values.to(acc)).to(values.dtype)


def _softmax_backward(p: torch.Tensor, dp: torch.Tensor) -> torch.Tensor:
    """dS = P * (dP - sum_j P dP): autograd's own fused kernel for softmax."""
    return torch.ops.aten._softmax_backward_data(dp, p, -1, p.dtype)


def _accumulate(total: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    return value if total is None else total.add_(value)


def _place(total: torch.Tensor | None, value: torch.Tensor, rows: slice, like: torch.Tensor) -> torch.Tensor:
    """Write a chunk's rows of a gradient shaped like ``like`` (the whole gradient if one chunk)."""
    if rows.start == 0 and rows.stop == like.shape[-2]:
        return value
    if total is None:
        total = like.new_empty(*value.shape[:-2], like.shape[-2], value.shape[-1])
    total[..., rows, :] = value
    return total


def _without_autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast off on ``device`` (where it exists: not on the meta device)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


class _RelativeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, row, col, bias, ids, scale, num_buckets, bucket_weights, chunk):
        with _without_autocast(q.device):
            return _forward(ctx, q, k, v, row, col, bias, ids, scale, num_buckets, bucket_weights, chunk)

    @staticmethod
    def backward(ctx, grad_out, grad_weights=None):
        with _without_autocast(grad_out.device):
            return _backward(ctx, grad_out.to(ctx.dtype), None if grad_weights is None else grad_weights.to(ctx.dtype))


def _forward(ctx, q, k, v, row, col, bias, ids, scale, num_buckets, bucket_weights, chunk):
    inputs = _LogitInputs(q, k, row, col, bias, ids, scale, num_buckets)
    n = q.shape[-2]
    if chunk is None:  # stored
        p = inputs.logits(slice(None)).softmax(-1)
        out = torch.matmul(p, v)
        weights = None
        if bucket_weights:
            weights = _bucket_sums(p, inputs.index.rows(slice(None)), num_buckets)
        ctx.save_for_backward(q, k, v, row, col, bias, ids, p)
    else:
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        lse = q.new_empty(q.shape[:-1], dtype=torch.float32 if q.dtype != torch.float64 else q.dtype)
        weights = q.new_empty(*q.shape[:-1], num_buckets) if bucket_weights else None
        for start in range(0, n, chunk):
            rows = slice(start, min(n, start + chunk))
            s = inputs.logits(rows)
            top = s.amax(-1, keepdim=True)
            p = s.sub_(top).exp_()
            total = p.sum(-1, keepdim=True, dtype=lse.dtype)
            p.div_(total.to(p.dtype))
            lse[..., rows] = (top.to(lse.dtype) + total.log()).squeeze(-1)
            out[..., rows, :] = torch.matmul(p, v)
            if weights is not None:
                weights[..., rows, :] = _bucket_sums(p, inputs.index.rows(rows), num_buckets)
        ctx.save_for_backward(q, k, v, row, col, bias, ids, lse)
    ctx.scale, ctx.num_buckets, ctx.chunk, ctx.dtype = scale, num_buckets, chunk, q.dtype
    return out if weights is None else (out, weights)


def _backward(ctx, grad_out, grad_weights):
    q, k, v, row, col, bias, ids, saved = ctx.saved_tensors
    grad_out = grad_out.contiguous()
    inputs = _LogitInputs(q, k, row, col, bias, ids, ctx.scale, ctx.num_buckets)
    n, scale = q.shape[-2], ctx.scale
    want = ctx.needs_input_grad
    dq_parts: list[torch.Tensor] = []
    dk = dv = d_row = d_bias = None
    acc = _accumulation_dtype(q.dtype)
    d_col = col.new_zeros(col.shape, dtype=acc) if col is not None and want[4] else None
    for start in range(0, n, ctx.chunk or n):
        rows = slice(start, min(n, start + (ctx.chunk or n)))
        if ctx.chunk is None:
            p = saved
        else:  # the forward's weights
            p = inputs.logits(rows).to(saved.dtype).sub_(saved[..., rows, None]).exp_().to(q.dtype)
        g = grad_out[..., rows, :]
        dp = torch.matmul(g, v.transpose(-2, -1))
        if grad_weights is not None:
            dp.add_(lookup(grad_weights[..., rows, :], inputs.index.rows(rows), n))
        if want[2]:
            dv = _accumulate(dv, torch.matmul(p.transpose(-2, -1), g))
        ds = _softmax_backward(p, dp)
        del p, dp
        if want[0]:
            dq_parts.append(torch.matmul(ds, k).mul_(scale))
        if want[1]:
            dk = _accumulate(dk, torch.matmul(ds.transpose(-2, -1), inputs.scaled_queries(rows)))
        if row is not None and want[3]:
            per_query = row.shape[-2] != 1
            reduced = ds.sum_to_size(*row.shape[:-2], *ds.shape[-2:])  # over the batch (and heads) first
            if per_query:
                d_row = _place(d_row, _bucket_sums(reduced, inputs.index.rows(rows), ctx.num_buckets), rows, row)
            else:
                start_row = row.new_zeros(row.shape, dtype=acc) if d_row is None else d_row
                d_row = add_at(start_row, inputs.index.rows(rows, False), reduced.to(acc))
        if d_col is not None:
            add_at(d_col, inputs.index.columns(rows), ds.sum_to_size(*col.shape[:-2], *ds.shape[-2:]).to(acc))
        if bias is not None and want[5]:
            grad = ds.sum_to_size(*bias.shape[:-2], *ds.shape[-2:])
            if bias.shape[-2] == 1:
                d_bias = _accumulate(d_bias, grad.sum(-2, keepdim=True))
            else:
                d_bias = _place(d_bias, grad, rows, bias)
    dq = (dq_parts[0] if len(dq_parts) == 1 else torch.cat(dq_parts, dim=-2)) if dq_parts else None
    d_row, d_col = (None if g is None else g.to(q.dtype) for g in (d_row, d_col))
    return dq, dk, dv, d_row, d_col, d_bias, None, None, None, None, None


def bucketed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    ids: torch.Tensor | None = None,
    *,
    num_buckets: int = 0,
    row_scores: torch.Tensor | None = None,
    col_scores: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bucket_weights: bool = False,
    mode: str = "chunked",
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention with bucketed relative terms; returns (out, bucket weights or None).

    q, k, v: (B, heads, N, d), all in one dtype; ``ids`` (N, N) or (2, N, N) with ``num_buckets``
    K. ``row_scores`` (..., N or 1, K) and ``col_scores`` (..., N, K) broadcast to
    (B, heads, ., K) over their leading dimensions; ``bias`` broadcasts to (B, heads, N, N); all
    in logit units and in q's dtype. With ``bucket_weights`` the weights summed per bucket
    (B, heads, N, K) are returned too. ``mode`` is 'chunked' (``chunk`` queries at a time, by
    default :func:`chunk_rows`) or 'stored' (see the module docstring).
    """
    if ids is None and (row_scores is not None or col_scores is not None or bucket_weights):
        raise ValueError("row_scores, col_scores and bucket_weights are looked up by bucket id: pass ids")
    if mode not in MODES:
        raise ValueError(f"mode must be 'chunked' or 'stored', got {mode!r}")
    mixed = sorted({str(t.dtype) for t in (q, k, v, row_scores, col_scores, bias) if t is not None})
    if len(mixed) > 1:
        raise ValueError(
            f"bucketed_attention takes its inputs in one dtype, got {', '.join(mixed)}; cast them to q's dtype"
        )
    chunk = None if mode == "stored" else chunk or chunk_rows(q.shape[-2], q.shape[-1])
    # one copy each now instead of one per matrix product (q, k, v are usually strided views of qkv)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    result = _RelativeAttention.apply(
        q, k, v, row_scores, col_scores, bias, ids, scale, num_buckets, bucket_weights, chunk
    )
    return result if bucket_weights else (result, None)
