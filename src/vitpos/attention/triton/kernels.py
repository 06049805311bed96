"""Triton kernels of the ``triton`` path: FlashAttention-2 forward, dK/dV and dQ with bucketed terms.

Per tile of BLOCK_M queries and BLOCK_N keys the logits are

    s_ij = scale q_i . k_j + sum_m R[i, I_m(i, j)] + sum_m C[j, I_m(i, j)] + bias_ij

read in registers from the bucket ids I_m (int8 or int16; one map, or two for the Cross method),
the row scores R (B or 1, heads or 1, N or 1, K: the contextual key term q . r_K and / or a bias
per bucket), the column scores C (the contextual query term k . r_Q) and a dense bias (masks:
Swin's shifted windows, padded keys; a bias without bucket form). The forward pass keeps
the log-sum-exp of every row. For a term on values it then passes over the keys once more and
adds every weight a_ij into W[i, I(i, j)], the attention weights summed per bucket. The backward
passes recompute each tile's weights from the log-sum-exp; the dK/dV kernel owns a block of keys,
the dQ kernel a block of queries. Every score's gradient ds_ij is added into its bucket's
gradient (dR[i, I(i, j)], dC[j, I(i, j)]) by one float32 atomic per element, as iRPE's CUDA
operator and FlexAttention's gradients of captured tables do: the cost of a tile does not grow
with the number of buckets it spans. The per-bucket buffers hold a row per (image, head), so only
the programs of one (image, head) add into the same address. The atomic-free variant
(``triton_stored``) turns those adds off and has the dQ kernel store every ds_ij once, in the
dense bias's gradient buffer (:mod:`.score_grads` reduces them per bucket).

This module imports :mod:`triton`; set ``TRITON_INTERPRET=1`` before importing it to run the
kernels on CPU tensors (the interpreter keeps bf16 as raw integers, so the kernels then compute
in float32 from their loads on, and it checks no bounds, so every load and store is masked).
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

__all__ = ["INTERPRET", "STORE", "ATOMIC_ROWS", "ATOMIC_SUM", "TUNING"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
"""True when the kernels run in Triton's interpreter (on CPU tensors)."""

STORE, ATOMIC_ROWS, ATOMIC_SUM = 0, 1, 2
"""How a program writes its tile of the dense bias's gradient: owned rows, rows shared with other
programs (a bias broadcast over the batch or heads), or one row shared by every query."""

TUNING = [
    triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
    for m, n, w, s in ((64, 32, 8, 2), (32, 32, 4, 2), (64, 64, 8, 2), (128, 32, 8, 2), (32, 64, 4, 2))
]
"""Tile sizes and warps ``triton.autotune`` may pick from on CUDA (:mod:`.tuning` keeps, per GPU, those
that compile without spills). ptxas compiles the kernels for sm_90 with 200 to 255 registers per
thread; these are the configurations that spill least there (``python -m bench.attention.fused_compile``,
BENCHMARKS.md); 64 x 64 tiles on 4 warps spill more."""


@triton.jit
def _load_tile(ptr, rows, cols, stride_r, stride_c, num_rows, num_cols, UPCAST: tl.constexpr):
    """A (rows, cols) tile, zero outside the matrix; float32 in the interpreter."""
    inside = (rows[:, None] < num_rows) & (cols[None, :] < num_cols)
    x = tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=inside, other=0.0)
    if UPCAST:
        x = x.to(tl.float32)
    return x


@triton.jit
def _lookup(ptr, owners, ids, stride_owner, stride_bucket, inside):
    """scores[owner, id] at every pair of the tile, in float32 (owners broadcast against ids)."""
    return tl.load(ptr + owners * stride_owner + ids * stride_bucket, mask=inside, other=0.0).to(tl.float32)


@triton.jit
def _add_per_bucket(ptr, x, owners, ids, stride_owner, inside):
    """grad[owner, id] += x at every pair of the tile, one float32 atomic per element."""
    tl.atomic_add(ptr + owners * stride_owner + ids, x, mask=inside, sem="relaxed")


@triton.jit
def _logits(
    q, k, offs_m, offs_n, N, M, scale,
    IDS, stride_im, stride_ii, stride_ij, ROW, stride_rn, stride_rk, COL, stride_cn, stride_ck,
    BIAS, stride_bi, stride_bj,
    NUM_MAPS: tl.constexpr, HAS_ROW: tl.constexpr, HAS_COL: tl.constexpr, HAS_BIAS: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """The tile's logits (float32, -inf past the last key) and its bucket-id maps (int32)."""
    inside = (offs_m[:, None] < N) & (offs_n[None, :] < M)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
    ids0 = tl.zeros((offs_m.shape[0], offs_n.shape[0]), dtype=tl.int32)
    ids1 = ids0
    for m in tl.static_range(NUM_MAPS):
        ids = tl.load(
            IDS + m * stride_im + offs_m[:, None] * stride_ii + offs_n[None, :] * stride_ij, mask=inside, other=0
        ).to(tl.int32)
        if HAS_ROW:
            s += _lookup(ROW, offs_m[:, None], ids, stride_rn, stride_rk, inside)
        if HAS_COL:
            s += _lookup(COL, offs_n[None, :], ids, stride_cn, stride_ck, inside)
        if m == 0:
            ids0 = ids
        else:
            ids1 = ids
    if HAS_BIAS:
        s += tl.load(BIAS + offs_m[:, None] * stride_bi + offs_n[None, :] * stride_bj, mask=inside, other=0.0).to(
            tl.float32
        )
    return tl.where(offs_n[None, :] < M, s, float("-inf")), ids0, ids1


@triton.jit
def _write_grad(ptr, grad, owners, num_owners, cols, num_cols, stride_owner, MODE: tl.constexpr):
    """Write (or atomically add) a program's tile (owners, cols) of the dense bias's gradient into
    a float32 buffer with unit column stride."""
    inside = (owners[:, None] < num_owners) & (cols[None, :] < num_cols)
    if MODE == 0:
        tl.store(ptr + owners[:, None] * stride_owner + cols[None, :], grad, mask=inside)
    elif MODE == 1:
        tl.atomic_add(ptr + owners[:, None] * stride_owner + cols[None, :], grad, mask=inside)
    else:
        tl.atomic_add(ptr + cols, tl.sum(tl.where(inside, grad, 0.0), axis=0), mask=cols < num_cols)


@triton.jit
def _forward_kernel(
    Q, K, V, IDS, ROW, COL, BIAS, OUT, LSE, W,
    sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
    stride_im, stride_ii, stride_ij, srb, srh, srn, srk, scb, sch, scn, sck, sbb, sbh, sbi, sbj,
    sob, soh, son, sod,
    H, N, M, D, NB, tune_bh, tune_n, tune_m, scale,
    NUM_MAPS: tl.constexpr, HAS_ROW: tl.constexpr, HAS_COL: tl.constexpr, HAS_BIAS: tl.constexpr,
    VALUE: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Out and log-sum-exp of BLOCK_M queries of one (image, head); with VALUE, their weights summed
    per bucket added into W (B * heads, N, NB; float32, zero before the call).

    tune_bh, tune_n, tune_m: the autotuner's key (sizes rounded up), not read by the kernel."""
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_tile(Q + b * sqb + h * sqh, offs_m, offs_d, sqn, sqd, N, D, UPCAST)
    ROW += b * srb + h * srh
    COL += b * scb + h * sch
    BIAS += b * sbb + h * sbh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, M, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k = _load_tile(K + b * skb + h * skh, offs_n, offs_d, skn, skd, M, D, UPCAST)
        v = _load_tile(V + b * svb + h * svh, offs_n, offs_d, svn, svd, M, D, UPCAST)
        s, ids0, ids1 = _logits(
            q, k, offs_m, offs_n, N, M, scale, IDS, stride_im, stride_ii, stride_ij, ROW, srn, srk, COL, scn, sck,
            BIAS, sbi, sbj, NUM_MAPS, HAS_ROW, HAS_COL, HAS_BIAS, PRECISION,
        )  # fmt: skip
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with every key masked so far
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    rows_in = offs_m < N
    out_ptr = OUT + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod
    tl.store(out_ptr, (acc / l_safe[:, None]).to(OUT.dtype.element_ty), mask=rows_in[:, None] & (offs_d[None, :] < D))
    # a row with no key left has weights 0 in backward and here: exp(s - inf)
    lse = tl.where(l_i > 0.0, m_i + tl.log(l_safe), float("inf"))
    tl.store(LSE + bh * N + offs_m, lse, mask=rows_in)
    if VALUE:  # a second pass, now that the weights' normaliser is known
        for start in range(0, M, BLOCK_N):
            offs_n = start + tl.arange(0, BLOCK_N)
            k = _load_tile(K + b * skb + h * skh, offs_n, offs_d, skn, skd, M, D, UPCAST)
            s, ids0, ids1 = _logits(
                q, k, offs_m, offs_n, N, M, scale, IDS, stride_im, stride_ii, stride_ij, ROW, srn, srk, COL, scn,
                sck, BIAS, sbi, sbj, NUM_MAPS, HAS_ROW, HAS_COL, HAS_BIAS, PRECISION,
            )  # fmt: skip
            p = tl.exp(s - lse[:, None])
            inside = rows_in[:, None] & (offs_n[None, :] < M)
            _add_per_bucket(W + bh * N * NB, p, offs_m[:, None], ids0, NB, inside)
            if NUM_MAPS == 2:
                _add_per_bucket(W + bh * N * NB, p, offs_m[:, None], ids1, NB, inside)


@triton.jit
def _backward_kv_kernel(
    Q, K, V, IDS, ROW, COL, BIAS, DO, LSE, DELTA, DW, DK, DV, DCOL,
    sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
    stride_im, stride_ii, stride_ij, srb, srh, srn, srk, scb, sch, scn, sck, sbb, sbh, sbi, sbj,
    sob, soh, son, sod,
    sdcb, sdch, sdcn,
    H, N, M, D, NB, tune_bh, tune_n, tune_m, scale,
    NUM_MAPS: tl.constexpr, HAS_ROW: tl.constexpr, HAS_COL: tl.constexpr, HAS_BIAS: tl.constexpr,
    VALUE: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
    COL_GRAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dK, dV and the column score gradients of BLOCK_N keys of one (image, head).

    DO is (B, heads, N, d) contiguous with the strides of OUT (sob ...); LSE, DELTA (B * heads, N)
    and DW (B * heads, N, K) are contiguous float32; DK, DV are (B, heads, M, d) contiguous; the
    column score gradients are added into DCOL (B, heads, M, K; float32, zero before the call)."""
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    k = _load_tile(K + b * skb + h * skh, offs_n, offs_d, skn, skd, M, D, UPCAST)
    v = _load_tile(V + b * svb + h * svh, offs_n, offs_d, svn, svd, M, D, UPCAST)
    ROW += b * srb + h * srh
    COL += b * scb + h * sch
    BIAS += b * sbb + h * sbh
    DCOL += b * sdcb + h * sdch
    dk = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for start in range(0, N, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        rows_in = offs_m < N
        q = _load_tile(Q + b * sqb + h * sqh, offs_m, offs_d, sqn, sqd, N, D, UPCAST)
        do = _load_tile(DO + b * sob + h * soh, offs_m, offs_d, son, sod, N, D, UPCAST)
        lse = tl.load(LSE + bh * N + offs_m, mask=rows_in, other=float("inf"))
        delta = tl.load(DELTA + bh * N + offs_m, mask=rows_in, other=0.0)
        s, ids0, ids1 = _logits(
            q, k, offs_m, offs_n, N, M, scale, IDS, stride_im, stride_ii, stride_ij, ROW, srn, srk, COL, scn, sck,
            BIAS, sbi, sbj, NUM_MAPS, HAS_ROW, HAS_COL, HAS_BIAS, PRECISION,
        )  # fmt: skip
        p = tl.exp(s - lse[:, None])
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        inside = rows_in[:, None] & (offs_n[None, :] < M)
        if VALUE:
            dp += _lookup(DW + bh * N * NB, offs_m[:, None], ids0, NB, 1, inside)
            if NUM_MAPS == 2:
                dp += _lookup(DW + bh * N * NB, offs_m[:, None], ids1, NB, 1, inside)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
        if COL_GRAD:
            _add_per_bucket(DCOL, ds, offs_n[None, :], ids0, sdcn, inside)
            if NUM_MAPS == 2:
                _add_per_bucket(DCOL, ds, offs_n[None, :], ids1, sdcn, inside)
    inside_n = (offs_n[:, None] < M) & (offs_d[None, :] < D)
    tile = bh * M * D + offs_n[:, None] * D + offs_d[None, :]
    tl.store(DK + tile, (dk * scale).to(DK.dtype.element_ty), mask=inside_n)
    tl.store(DV + tile, dv.to(DV.dtype.element_ty), mask=inside_n)


@triton.jit
def _backward_q_kernel(
    Q, K, V, IDS, ROW, COL, BIAS, DO, LSE, DELTA, DW, DQ, DROW, DBIAS,
    sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
    stride_im, stride_ii, stride_ij, srb, srh, srn, srk, scb, sch, scn, sck, sbb, sbh, sbi, sbj,
    sob, soh, son, sod,
    sdrb, sdrh, sdrn, sdbb, sdbh, sdbi,
    H, N, M, D, NB, tune_bh, tune_n, tune_m, scale,
    NUM_MAPS: tl.constexpr, HAS_ROW: tl.constexpr, HAS_COL: tl.constexpr, HAS_BIAS: tl.constexpr,
    VALUE: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
    ROW_GRAD: tl.constexpr, BIAS_GRAD: tl.constexpr, BIAS_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dQ, the row score gradients and the bias gradient of BLOCK_M queries of one (image, head)
    (layouts as in dK/dV; DROW (B, heads, N or 1, K) and DBIAS are float32, zero before the call,
    with zero strides along broadcast axes)."""
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    rows_in = offs_m < N
    q = _load_tile(Q + b * sqb + h * sqh, offs_m, offs_d, sqn, sqd, N, D, UPCAST)
    do = _load_tile(DO + b * sob + h * soh, offs_m, offs_d, son, sod, N, D, UPCAST)
    lse = tl.load(LSE + bh * N + offs_m, mask=rows_in, other=float("inf"))
    delta = tl.load(DELTA + bh * N + offs_m, mask=rows_in, other=0.0)
    ROW += b * srb + h * srh
    COL += b * scb + h * sch
    BIAS += b * sbb + h * sbh
    DROW += b * sdrb + h * sdrh
    dq = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, M, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k = _load_tile(K + b * skb + h * skh, offs_n, offs_d, skn, skd, M, D, UPCAST)
        v = _load_tile(V + b * svb + h * svh, offs_n, offs_d, svn, svd, M, D, UPCAST)
        s, ids0, ids1 = _logits(
            q, k, offs_m, offs_n, N, M, scale, IDS, stride_im, stride_ii, stride_ij, ROW, srn, srk, COL, scn, sck,
            BIAS, sbi, sbj, NUM_MAPS, HAS_ROW, HAS_COL, HAS_BIAS, PRECISION,
        )  # fmt: skip
        p = tl.exp(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        inside = rows_in[:, None] & (offs_n[None, :] < M)
        if VALUE:
            dp += _lookup(DW + bh * N * NB, offs_m[:, None], ids0, NB, 1, inside)
            if NUM_MAPS == 2:
                dp += _lookup(DW + bh * N * NB, offs_m[:, None], ids1, NB, 1, inside)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        if BIAS_GRAD:
            _write_grad(DBIAS + b * sdbb + h * sdbh, ds, offs_m, N, offs_n, M, sdbi, BIAS_MODE)
        if ROW_GRAD:
            _add_per_bucket(DROW, ds, offs_m[:, None], ids0, sdrn, inside)
            if NUM_MAPS == 2:
                _add_per_bucket(DROW, ds, offs_m[:, None], ids1, sdrn, inside)
    tile = bh * N * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(DQ + tile, (dq * scale).to(DQ.dtype.element_ty), mask=rows_in[:, None] & (offs_d[None, :] < D))
