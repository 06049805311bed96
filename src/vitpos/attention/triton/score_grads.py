"""The atomic-free per-bucket gradients of the fused backward: score gradients stored once, reduced by matmuls.

The ``triton_stored`` path's dQ kernel stores every score gradient ds_ij (B, heads, N, M) once, in
bf16 for bf16 inputs and in float32 otherwise (bf16 keeps float32's range; fp16 would flush the
small gradients of a long row to zero), in place of adding it into its bucket with an atomic.
The per-bucket gradients are then sums of ds against the static one-hot bucket map
H (N, M, K) (H[i, j, k] = number of maps m with I_m(i, j) = k; two maps for the Cross method):

* a row table read per query (a contextual term on keys): dR[b, h, i, :] = ds[b, h, i, :] @ H[i],
  one batched matmul over the queries;
* a column table read per key (a contextual term on queries): dC[b, h, j, :] = ds[b, h, :, j] @ H[:, j];
* a row table shared by every query (a bias per bucket): ds summed over the axes the table is
  broadcast over (batch, heads), then one (.., N * M) @ (N * M, K) matmul;
* a dense bias: ds summed to its shape.

Every sum runs in a matmul or a reduction with float32 accumulation, so no two programs ever add
into one address and the result does not depend on their order. The one-hot maps are built once per
bucket-id tensor (the per-grid caches keep the ids alive) and dtype.
"""

from __future__ import annotations

import torch
from torch.utils.weak import WeakTensorKeyDictionary

__all__ = ["score_grad_dtype", "one_hot", "row_grad", "col_grad", "dense_grad"]

_ONE_HOT: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
"""{bucket ids: {(K, dtype): (N, M, K) one-hot map}}."""


def score_grad_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the score gradients are stored in for inputs of ``dtype``: bf16 for bf16, float32 otherwise."""
    return torch.bfloat16 if dtype == torch.bfloat16 else torch.float32


def one_hot(ids: torch.Tensor, num_buckets: int, dtype: torch.dtype) -> torch.Tensor:
    """H (N, M, K) in ``dtype``: how many of the id maps of ``ids`` ((N, M) or (maps, N, M)) put (i, j) in bucket k."""
    per_ids = _ONE_HOT.setdefault(ids, {})
    key = (num_buckets, dtype)
    if key not in per_ids:
        maps = ids if ids.ndim == 3 else ids.unsqueeze(0)
        hot = torch.zeros(*maps.shape[1:], num_buckets, dtype=torch.float32, device=ids.device)
        for id_map in maps:
            hot.scatter_add_(-1, id_map.long().unsqueeze(-1), torch.ones_like(hot[..., :1]))
        per_ids[key] = hot.to(dtype)  # counts 0, 1, 2: exact in every floating dtype
    return per_ids[key]


def _matmul_dtype(ds: torch.Tensor) -> torch.dtype:
    """bf16 tensor cores for bf16 score gradients on CUDA; float32 elsewhere (CPU has no fast bf16 bmm)."""
    return ds.dtype if ds.is_cuda else torch.float32


def row_grad(ds: torch.Tensor, ids: torch.Tensor, num_buckets: int, shape: torch.Size) -> torch.Tensor:
    """The float32 gradient of row scores of ``shape`` (B or 1, heads or 1, N or 1, K) from ds (B, heads, N, M)."""
    b, h, n, m = ds.shape
    if shape[-2] == 1:  # shared by every query: sum over the broadcast axes first, then one matmul
        summed = ds.float().sum_to_size(*shape[:-2], n, m).reshape(-1, n * m)
        grad = summed @ one_hot(ids, num_buckets, torch.float32).reshape(n * m, num_buckets)
        return grad.reshape(*shape[:-2], 1, num_buckets)
    dtype = _matmul_dtype(ds)
    per_query = ds.to(dtype).permute(2, 0, 1, 3).reshape(n, b * h, m)  # N, B * heads, M
    grad = torch.bmm(per_query, one_hot(ids, num_buckets, dtype)).float()  # N, B * heads, K
    return grad.reshape(n, b, h, num_buckets).permute(1, 2, 0, 3).sum_to_size(shape).contiguous()


def col_grad(ds: torch.Tensor, ids: torch.Tensor, num_buckets: int, shape: torch.Size) -> torch.Tensor:
    """The float32 gradient of column scores of ``shape`` (B or 1, heads or 1, M, K) from ds (B, heads, N, M)."""
    b, h, n, m = ds.shape
    dtype = _matmul_dtype(ds)
    per_key = ds.to(dtype).permute(3, 0, 1, 2).reshape(m, b * h, n)  # M, B * heads, N
    hot = one_hot(ids, num_buckets, dtype).transpose(0, 1)  # M, N, K
    grad = torch.bmm(per_key, hot).float()  # M, B * heads, K
    return grad.reshape(m, b, h, num_buckets).permute(1, 2, 0, 3).sum_to_size(shape).contiguous()


def dense_grad(ds: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The float32 gradient of a dense bias of ``shape`` (broadcast to (B, heads, N, M)) from ds."""
    return ds.float().sum_to_size(shape)
