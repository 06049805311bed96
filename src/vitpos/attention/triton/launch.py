"""Launching the kernels of :mod:`.kernels`: strides, buffers, grids and tile sizes.

Every tensor is passed with its own strides (zero along the axes it broadcasts over), so views
(q, k, v cut from one qkv projection, a bias expanded over heads) are read in place. Outputs
and gradients are new contiguous tensors; per-bucket gradients are accumulated in float32.
Tile sizes are autotuned on CUDA; the interpreter takes fixed tiles (or ``config``).
"""

from __future__ import annotations

import functools

import torch
import triton

from .kernels import (
    ATOMIC_ROWS,
    ATOMIC_SUM,
    INTERPRET,
    STORE,
    TUNING,
    _backward_kv_kernel,
    _backward_q_kernel,
    _forward_kernel,
)
from .reference import stats_dtype

__all__ = ["forward", "backward"]

INTERPRETER_TILES = (64, 64)
"""(BLOCK_M, BLOCK_N) in the interpreter, where a tile costs its Python overhead whatever its size."""


def _broadcast_strides(t: torch.Tensor | None, shape: tuple[int, ...]) -> list[int]:
    """Strides of ``t`` read as ``shape`` (zero along broadcast axes); zeros for a missing tensor."""
    return [0] * len(shape) if t is None else list(t.expand(shape).stride())


def _bucket_maps(ids: torch.Tensor | None, num_buckets: int) -> torch.Tensor | None:
    """The id maps (maps, N, M) as int8 (up to 127 buckets) or int16."""
    if ids is None:
        return None
    maps = ids if ids.ndim == 3 else ids.unsqueeze(0)
    return maps.to(torch.int8 if num_buckets <= 127 else torch.int16)


def _grad_mode(grad: torch.Tensor, batch_heads: tuple[int, int]) -> int:
    """How the programs write ``grad`` ([B or 1, [heads or 1,]] rows or 1, K or M) of a tensor read
    as (B, heads, rows, .): rows shared by every query are summed first, shared rows added atomically."""
    if grad.shape[-2] == 1:
        return ATOMIC_SUM
    return STORE if tuple(grad.shape[:-2]) == batch_heads else ATOMIC_ROWS


class _Call:
    """The shared arguments of the three kernels for one attention call."""

    def __init__(self, q, k, v, ids, row, col, bias, num_buckets: int) -> None:
        b, h, n, d = q.shape
        m = k.shape[-2]
        self.shape = (b, h, n, m, d)
        maps = _bucket_maps(ids, num_buckets)
        self.tensors = [q, k, v, *(q if t is None else t for t in (maps, row, col, bias))]
        self.strides = [
            *q.stride(), *k.stride(), *v.stride(),
            *_broadcast_strides(maps, (0 if maps is None else maps.shape[0], n, m)),
            *_broadcast_strides(row, (b, h, n, num_buckets)), *_broadcast_strides(col, (b, h, m, num_buckets)),
            *_broadcast_strides(bias, (b, h, n, m)),
        ]  # fmt: skip
        self.flags = dict(
            NUM_MAPS=0 if maps is None else maps.shape[0], HAS_ROW=row is not None, HAS_COL=col is not None,
            HAS_BIAS=bias is not None, UPCAST=INTERPRET, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            BLOCK_D=max(16, triton.next_power_of_2(d)), BLOCK_K=max(16, triton.next_power_of_2(max(1, num_buckets))),
        )  # fmt: skip
        self.sizes = [h, n, m, d, num_buckets]

    def launch(self, kernel, rows: int, block: str, config: list[int], reset: tuple[str, ...], *args, **flags) -> None:
        """Run ``kernel`` over ``rows`` (queries or keys) in tiles of ``block`` for every (image, head)."""
        b, h = self.shape[:2]
        flags = {**self.flags, **flags}
        if config or INTERPRET:
            block_m, block_n, loop = config or (*INTERPRETER_TILES, 0)
            tiles = {"BLOCK_M": block_m, "BLOCK_N": block_n}
            kernel[(triton.cdiv(rows, tiles[block]), b * h)](*args, **flags, **tiles, ONE_HOT=not loop)
        else:

            def grid(meta: dict) -> tuple[int, int]:
                return triton.cdiv(rows, meta[block]), b * h

            _tuned(kernel, reset)[grid](*args, **flags, ONE_HOT=False)


@functools.cache
def _tuned(kernel, reset: tuple[str, ...]):
    """``kernel`` with its tiles and warps chosen by ``triton.autotune`` per shape (CUDA)."""
    key = ["N", "M", "D", "NB", "NUM_MAPS", "HAS_ROW", "HAS_COL", "HAS_BIAS", "VALUE"]
    return triton.autotune(configs=TUNING, key=key, reset_to_zero=list(reset))(kernel)


def _store_dtype(dtype: torch.dtype) -> torch.dtype:
    """The interpreter stores float32 (it would write bf16 as raw integers); CUDA the inputs' dtype."""
    return torch.float32 if INTERPRET else dtype


def forward(q, k, v, ids, row, col, bias, scale: float, num_buckets: int, value_term: bool, config: list[int]):
    """(out, log-sum-exp (B, heads, N), weights per bucket (B, heads, N, K) or empty; both in
    :func:`.reference.stats_dtype`)."""
    call = _Call(q, k, v, ids, row, col, bias, num_buckets)
    b, h, n, _, d = call.shape
    out = q.new_empty(b, h, n, d, dtype=_store_dtype(q.dtype))
    lse = q.new_empty(b, h, n, dtype=stats_dtype(q.dtype))
    weights = q.new_zeros((b, h, n, num_buckets) if value_term else (0,), dtype=stats_dtype(q.dtype))
    args = [*call.tensors, out, lse, q if not value_term else weights, *call.strides, *out.stride(), *call.sizes]
    call.launch(_forward_kernel, n, "BLOCK_M", config, (), *args, scale, VALUE=value_term)
    return out.to(q.dtype), lse, weights


def backward(
    grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, scale, num_buckets, grads, config
):
    """(dq, dk, dv, d_row, d_col, d_bias), the last three empty where ``grads`` (row, col, bias) says
    none is wanted."""
    call = _Call(q, k, v, ids, row, col, bias, num_buckets)
    b, h, n, m, d = call.shape
    grad_out = grad_out.contiguous()
    delta = (grad_out.float() * out.float()).sum(-1)
    value = grad_weights is not None
    if value:
        grad_weights = grad_weights.float().contiguous()
        delta += (weights * grad_weights).sum(-1)
    store = _store_dtype(q.dtype)
    dq, dk, dv = (
        q.new_empty(b, h, n, d, dtype=store),
        q.new_empty(b, h, m, d, dtype=store),
        q.new_empty(b, h, m, d, dtype=store),
    )
    want_row, want_col = row is not None and grads[0], col is not None and grads[1]
    d_row = q.new_zeros(row.shape, dtype=torch.float32) if want_row else None
    d_col = q.new_zeros(col.shape, dtype=torch.float32) if want_col else None
    d_bias = q.new_zeros(bias.shape, dtype=torch.float32) if bias is not None and grads[2] else None
    shared = [*call.tensors, grad_out, lse, delta, q if not value else grad_weights]
    strides = [*call.strides, *grad_out.stride()]
    call.launch(
        _backward_kv_kernel, m, "BLOCK_N", config, ("DCOL",), *shared, dk, dv, q if d_col is None else d_col,
        *strides, *_broadcast_strides(d_col, (b, h, m, num_buckets))[:3], *call.sizes, scale,
        VALUE=value, COL_GRAD=want_col, COL_MODE=STORE if d_col is None else _grad_mode(d_col, (b, h)),
    )  # fmt: skip
    call.launch(
        _backward_q_kernel, n, "BLOCK_M", config, ("DROW", "DBIAS"), *shared, dq, q if d_row is None else d_row,
        q if d_bias is None else d_bias, *strides, *_broadcast_strides(d_row, (b, h, n, num_buckets))[:3],
        *_broadcast_strides(d_bias, (b, h, n, m))[:3], *call.sizes, scale, VALUE=value, ROW_GRAD=want_row,
        ROW_MODE=STORE if d_row is None else _grad_mode(d_row, (b, h)), BIAS_GRAD=d_bias is not None,
        BIAS_MODE=STORE if d_bias is None else _grad_mode(d_bias, (b, h)),
    )  # fmt: skip
    return (
        dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype),
        *(q.new_empty(0) if g is None else g.to(t.dtype) for g, t in ((d_row, row), (d_col, col), (d_bias, bias))),
    )  # fmt: skip
