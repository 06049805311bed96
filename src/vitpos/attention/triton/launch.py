"""Launching the kernels of :mod:`.kernels`: strides, buffers, grids and tile sizes.

Every tensor is passed with its own strides (zero along the axes it broadcasts over), so views
(q, k, v cut from one qkv projection, a bias expanded over heads) are read in place. No tensor of
the caller is ever passed where a kernel or the autotuner writes: outputs and gradients are new
tensors, an absent input or an unwanted output gets a one-element buffer of its own. Per-bucket
gradients are added up in float32 buffers with a row per (image, head), summed to the tables'
shapes afterwards; or, with ``stored``, the dQ kernel stores every score gradient once (as it
stores a dense bias's) and :mod:`.score_grads` reduces them per bucket by matmuls, no atomics.

Tile sizes are autotuned on CUDA (:data:`AUTOTUNE`) among the configurations :mod:`.tuning` keeps
for the GPU, keyed on sizes rounded up to the next power of two: queries and keys (N, M), images
times heads and the head width; so padded batches of varied sizes (a detector's, an epoch's last
batch) share a tuning and do not each cost a tuning pass. The interpreter takes fixed tiles (or
``config``).
"""

from __future__ import annotations

import functools

import torch
import triton

from . import score_grads
from .kernels import (
    ATOMIC_ROWS,
    ATOMIC_SUM,
    INTERPRET,
    STORE,
    _backward_kv_kernel,
    _backward_q_kernel,
    _forward_kernel,
)
from .reference import stats_dtype
from .tuning import autotune_options, capability, configs_for, tolerant_disk_cache

__all__ = ["AUTOTUNE", "forward", "backward", "tuning_sizes"]

AUTOTUNE = not INTERPRET
"""Tiles chosen by ``triton.autotune`` (CUDA); the interpreter takes :data:`INTERPRETER_TILES`."""

INTERPRETER_TILES = (64, 64)
"""(BLOCK_M, BLOCK_N) in the interpreter, where a tile costs its Python overhead whatever its size."""

TUNING_KEY = ("tune_bh", "tune_n", "tune_m", "BLOCK_D", "NUM_MAPS", "HAS_ROW", "HAS_COL", "HAS_BIAS", "VALUE")
"""What a tuning depends on (besides the tensors' dtypes, which ``triton.autotune`` adds)."""


def tuning_sizes(batch_heads: int, n: int, m: int) -> tuple[int, int, int]:
    """(images x heads, queries, keys) rounded up to the next power of two: the autotuner's key."""
    round_up = triton.next_power_of_2
    return round_up(batch_heads), round_up(n), round_up(m)


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
    """How the programs write ``grad`` ([B or 1, [heads or 1,]] rows or 1, M) of a bias read as
    (B, heads, N, M): rows shared by every query are summed first, shared rows added atomically."""
    if grad.shape[-2] == 1:
        return ATOMIC_SUM
    return STORE if tuple(grad.shape[:-2]) == batch_heads else ATOMIC_ROWS


def _own(q: torch.Tensor) -> torch.Tensor:
    """A one-element float32 buffer in the place of an absent tensor or an unwanted output: the
    kernels never touch it, and the autotuner may zero it without touching anything of the caller's."""
    return q.new_empty(1, dtype=torch.float32)


class _Call:
    """The shared arguments of the three kernels for one attention call."""

    def __init__(self, q, k, v, ids, row, col, bias, num_buckets: int) -> None:
        b, h, n, d = q.shape
        m = k.shape[-2]
        self.shape = (b, h, n, m, d)
        maps = _bucket_maps(ids, num_buckets)
        self.tensors = [q, k, v, *(_own(q) if t is None else t for t in (maps, row, col, bias))]
        self.strides = [
            *q.stride(), *k.stride(), *v.stride(),
            *_broadcast_strides(maps, (0 if maps is None else maps.shape[0], n, m)),
            *_broadcast_strides(row, (b, h, n, num_buckets)), *_broadcast_strides(col, (b, h, m, num_buckets)),
            *_broadcast_strides(bias, (b, h, n, m)),
        ]  # fmt: skip
        self.flags = dict(
            NUM_MAPS=0 if maps is None else maps.shape[0], HAS_ROW=row is not None, HAS_COL=col is not None,
            HAS_BIAS=bias is not None, UPCAST=INTERPRET, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            BLOCK_D=max(16, triton.next_power_of_2(d)),
        )  # fmt: skip
        self.sizes = [h, n, m, d, num_buckets, *tuning_sizes(b * h, n, m)]

    def launch(self, kernel, rows: int, block: str, config: list[int], reset: tuple[str, ...], *args, **flags) -> None:
        """Run ``kernel`` over ``rows`` (queries or keys) in tiles of ``block`` for every (image, head);
        ``reset``: the arguments the kernel adds into (zeroed by the autotuner before each of its runs)."""
        b, h = self.shape[:2]
        flags = {**self.flags, **flags}
        if config or not AUTOTUNE:
            block_m, block_n = config[:2] if config else INTERPRETER_TILES
            tiles = {"BLOCK_M": block_m, "BLOCK_N": block_n}
            kernel[(triton.cdiv(rows, tiles[block]), b * h)](*args, **flags, **tiles)
        else:

            def grid(meta: dict) -> tuple[int, int]:
                return triton.cdiv(rows, meta[block]), b * h

            grad_flags = tuple(name for name in ("COL_GRAD", "ROW_GRAD", "BIAS_GRAD", "BIAS_MODE") if name in flags)
            gpu = capability(self.tensors[0].device)
            _tuned(kernel, reset, grad_flags, gpu)[grid](*args, **flags)


@functools.cache
def _tuned(kernel, reset: tuple[str, ...], flags: tuple[str, ...], gpu: tuple[int, int]):
    """``kernel`` with its tiles and warps chosen by ``triton.autotune`` per rounded shape among the
    configurations kept for the ``gpu`` (CUDA)."""
    configs = configs_for(kernel.__name__, gpu)
    tuner = triton.autotune(configs=configs, key=[*TUNING_KEY, *flags], reset_to_zero=list(reset), **autotune_options())
    return tolerant_disk_cache(tuner(kernel))


def _store_dtype(dtype: torch.dtype) -> torch.dtype:
    """The interpreter stores float32 (it would write bf16 as raw integers); CUDA the inputs' dtype."""
    return torch.float32 if INTERPRET else dtype


def _per_bucket_grad(scores: torch.Tensor, batch_heads: tuple[int, int]) -> torch.Tensor:
    """A zero float32 buffer (B, heads, rows, K) for the gradient of ``scores`` (B or 1, heads or 1, rows, K)."""
    return scores.new_zeros(*batch_heads, *scores.shape[-2:], dtype=torch.float32)


def forward(q, k, v, ids, row, col, bias, scale: float, num_buckets: int, value_term: bool, config: list[int]):
    """(out, log-sum-exp (B, heads, N), weights per bucket (B, heads, N, K) or empty; both in
    :func:`.reference.stats_dtype`)."""
    call = _Call(q, k, v, ids, row, col, bias, num_buckets)
    b, h, n, _, d = call.shape
    out = q.new_empty(b, h, n, d, dtype=_store_dtype(q.dtype))
    lse = q.new_empty(b, h, n, dtype=stats_dtype(q.dtype))
    weights = q.new_zeros((b, h, n, num_buckets) if value_term else (0,), dtype=stats_dtype(q.dtype))
    args = [*call.tensors, out, lse, weights if value_term else _own(q), *call.strides, *out.stride(), *call.sizes]
    call.launch(_forward_kernel, n, "BLOCK_M", config, ("W",), *args, scale, VALUE=value_term)
    return out.to(q.dtype), lse, weights


def backward(
    grad_out, grad_weights, q, k, v, ids, row, col, bias, out, lse, weights, scale, num_buckets, grads, config,
    stored=False,
):  # fmt: skip
    """(dq, dk, dv, d_row, d_col, d_bias), the last three empty where ``grads`` (row, col, bias) says
    none is wanted. ``stored``: the score gradients are stored once and reduced per bucket by matmuls
    (:mod:`.score_grads`) instead of added into their buckets by atomics."""
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
    wanted = [t is not None and wanted for t, wanted in zip((row, col, bias), grads, strict=True)]
    scores = None  # ds (B, heads, N, M), stored once by the dQ kernel where the variant asks for it
    if stored and any(wanted):
        scores = q.new_empty(b, h, n, m, dtype=_store_dtype(score_grads.score_grad_dtype(q.dtype)))
    d_row = _per_bucket_grad(row, (b, h)) if wanted[0] and scores is None else None
    d_col = _per_bucket_grad(col, (b, h)) if wanted[1] and scores is None else None
    d_bias = scores if scores is not None else q.new_zeros(bias.shape, dtype=torch.float32) if wanted[2] else None
    shared = [*call.tensors, grad_out, lse, delta, grad_weights if value else _own(q)]
    strides = [*call.strides, *grad_out.stride()]
    call.launch(
        _backward_kv_kernel, m, "BLOCK_N", config, ("DCOL",), *shared, dk, dv, _own(q) if d_col is None else d_col,
        *strides, *_broadcast_strides(d_col, (b, h, m, num_buckets))[:3], *call.sizes, scale,
        VALUE=value, COL_GRAD=d_col is not None,
    )  # fmt: skip
    call.launch(
        _backward_q_kernel, n, "BLOCK_M", config, ("DROW", "DBIAS"), *shared, dq,
        _own(q) if d_row is None else d_row, _own(q) if d_bias is None else d_bias, *strides,
        *_broadcast_strides(d_row, (b, h, n, num_buckets))[:3], *_broadcast_strides(d_bias, (b, h, n, m))[:3],
        *call.sizes, scale, VALUE=value, ROW_GRAD=d_row is not None, BIAS_GRAD=d_bias is not None,
        BIAS_MODE=STORE if d_bias is None else _grad_mode(d_bias, (b, h)),
    )  # fmt: skip
    if scores is not None:
        d_row, d_col, d_bias = _reduced(scores.to(score_grads.score_grad_dtype(q.dtype)), ids, num_buckets,
                                        (row, col, bias), wanted)  # fmt: skip
    return (
        dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype),
        *(q.new_empty(0) if g is None else g.sum_to_size(t.shape).to(t.dtype)
          for g, t in ((d_row, row), (d_col, col), (d_bias, bias))),
    )  # fmt: skip


def _reduced(scores: torch.Tensor, ids, num_buckets: int, tensors: tuple, wanted: list[bool]) -> list:
    """(d_row, d_col, d_bias) in float32 from the stored score gradients (None where not wanted)."""
    row, col, bias = tensors
    return [
        score_grads.row_grad(scores, ids, num_buckets, row.shape) if wanted[0] else None,
        score_grads.col_grad(scores, ids, num_buckets, col.shape) if wanted[1] else None,
        score_grads.dense_grad(scores, bias.shape) if wanted[2] else None,
    ]
