"""A slow reference for the relative encodings: r_ij built pair by pair, literally from the equations.

Nothing here uses vitpos's index or lookup code: bucket ids come from plain-Python versions of
Eq. 9 and Eq. 18-25, the encodings are materialised as (N, N, d) tensors and attention is
Eq. 5-6 / 10-17 with einsum. Only the slot string (parsed here by hand) and the module's learned
tensors are taken from the module under test.
"""

from __future__ import annotations

import functools
import math

import torch

from vitpos.models.layers import Attention
from vitpos.spec import SlotSpec

SUMS_OF_TWO_SQUARES = sorted({a * a + b * b for a in range(64) for b in range(64)})


def g(x: float, alpha: float, beta: float, gamma: float) -> int:
    """Eq. 18, with the integer bound floor(beta)."""
    bound = math.floor(beta)
    if abs(x) <= alpha:
        return max(-bound, min(bound, round(x)))
    far = round(alpha + math.log(abs(x) / alpha) / math.log(gamma / alpha) * (beta - alpha))
    return int(math.copysign(min(bound, far), x))


def h(x: float, beta: float) -> int:
    """Eq. 9 / the clip function, rounded to an integer."""
    bound = math.floor(beta)
    return round(max(-bound, min(bound, x)))


class AxisIndex:
    """One index function and its bound."""

    def __init__(self, kind: str, ratio: float | None = None, bound: int | None = None) -> None:
        self.kind = kind
        if bound is not None:
            self.alpha, self.beta, self.gamma = bound / 2, float(bound), 4.0 * bound
        else:
            self.alpha, self.beta, self.gamma = ratio, 2 * ratio, 8 * ratio
        self.bound = math.floor(self.beta)
        self.size = 2 * self.bound + 1

    def __call__(self, x: float) -> int:
        return h(x, self.beta) if self.kind == "clip" else g(x, self.alpha, self.beta, self.gamma)

    def _key(self) -> tuple:
        return (self.kind, self.alpha, self.beta, self.gamma)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AxisIndex) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@functools.lru_cache(maxsize=16)  # the pair loop is slow Python; timings should measure the attention
def reference_ids(method: str, grid, prefix: int, rows: AxisIndex, cols: AxisIndex | None = None, quant: str = "rank"):
    """Bucket ids per pair as nested lists: one (N, N) map, or two (rows, columns) for cross."""
    cols = cols or rows
    height, width = grid
    cells = [(r, c) for r in range(height) for c in range(width)]
    n = prefix + len(cells)
    extra = 1 if prefix else 0
    row_size = rows.size + extra
    maps = [[[0] * n for _ in range(n)] for _ in range(2 if method == "cross" else 1)]
    for i in range(n):
        for j in range(n):
            if i < prefix or j < prefix:
                if method == "product":
                    ids = [rows.size * cols.size]
                elif method == "cross":
                    ids = [rows.size, row_size + cols.size]
                else:
                    ids = [rows.size]
            else:
                (yi, xi), (yj, xj) = cells[i - prefix], cells[j - prefix]
                dy, dx = yi - yj, xi - xj
                if method == "product":
                    ids = [(rows(dy) + rows.bound) * cols.size + cols(dx) + cols.bound]
                elif method == "cross":
                    ids = [rows(dy) + rows.bound, row_size + cols(dx) + cols.bound]
                elif method == "euclidean":
                    ids = [rows(math.sqrt(dy * dy + dx * dx)) + rows.bound]
                else:
                    sq = dy * dy + dx * dx
                    value = SUMS_OF_TWO_SQUARES.index(sq) if quant == "rank" else sq
                    ids = [rows(value) + rows.bound]
            for m, value in enumerate(ids):
                maps[m][i][j] = value
    return [torch.tensor(m) for m in maps]


def _per_pair(table: torch.Tensor, maps) -> torch.Tensor:
    """(K, d) -> (1, N, N, d) or (heads, K, d) -> (heads, N, N, d)."""
    if table.ndim == 2:
        table = table[None]
    return sum(table[:, m] for m in maps)


def _per_pair_scalar(table: torch.Tensor, maps) -> torch.Tensor:
    """(heads or 1, K) -> (heads or 1, N, N)."""
    return sum(table[:, m] for m in maps)


def _irpe_setup(spec: SlotSpec):
    flags = set(spec.flags)
    options = dict(spec.options)
    method = next((f for f in spec.flags if f in ("euclidean", "quant", "cross", "product")), "product")
    mode = "bias" if "bias" in flags else "ctx"
    on = next((f for f in spec.flags if f and set(f) <= set("qkv")), "k")
    ratio = float(options.get("ratio", 1.9))
    index = AxisIndex("clip" if "clip" in flags else "piecewise", ratio=ratio)
    return method, mode, on, index, "squared" if "squared" in flags else "rank", "unscaled" not in flags


def _sinusoid(pos: int, dim: int) -> list[float]:
    """Vaswani et al.: PE(pos, 2m) = sin(pos / 10000^(2m/dim)), PE(pos, 2m+1) = cos(...)."""
    out = []
    for m in range(dim // 2):
        angle = pos / 10000 ** (2 * m / dim)
        out += [math.sin(angle), math.cos(angle)]
    return out


def reference_attention(
    attn: Attention, spec_text: str, x: torch.Tensor, grid, prefix: int, native_grid
) -> torch.Tensor:
    """Attention of ``attn`` with its relative encoding computed literally."""
    spec = SlotSpec.parse(spec_text)
    options = dict(spec.options)
    rel = attn.relative
    b, n, c = x.shape
    heads, d, scale = attn.num_heads, attn.head_dim, attn.scale
    q, k, v = attn.qkv(x).reshape(b, n, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
    logits_extra = 0.0
    value_extra = None

    if spec.name == "rope2d":
        q, k = _reference_rope(rel, spec, q, k, grid, prefix, d)
    elif spec.name in ("irpe", "shaw"):
        if spec.name == "irpe":
            method, mode, on, index, quant, scaled = _irpe_setup(spec)
        else:
            method, mode, on, quant, scaled = "product", "ctx", "kv", "rank", True
            index = AxisIndex("clip", bound=int(options.get("max_dist", 3)))
        maps = reference_ids(method, grid, prefix, index, quant=quant)
        if mode == "bias":
            bias = sum(_per_pair_scalar(getattr(rel, f"bias_{t}"), maps) for t in on)
            logits_extra = bias * (d**-0.5 if scaled else 1.0)
        else:
            per_pair = {t: _per_pair(getattr(rel, f"table_{t}"), maps).expand(heads, -1, -1, -1) for t in on}
            if "k" in on:  # Eq. 15: q_i r^K_ij
                logits_extra = logits_extra + scale * torch.einsum("bhid,hijd->bhij", q, per_pair["k"])
            if "q" in on:  # Eq. 16: k_j r^Q_ij
                logits_extra = logits_extra + scale * torch.einsum("bhjd,hijd->bhij", k, per_pair["q"])
            value_extra = per_pair.get("v")
    elif spec.name == "huang":  # Eq. 11
        maps = reference_ids("product", grid, prefix, AxisIndex("clip", bound=int(options.get("max_dist", 3))))
        p = _per_pair(rel.table, maps)[0]  # N, N, d
        qp = q[:, :, :, None, :] + p
        kp = k[:, :, None, :, :] + p
        logits_extra = scale * ((qp * kp).sum(-1) - (p * p).sum(-1)) - scale * q @ k.transpose(-2, -1)
    elif spec.name == "xl":  # Eq. 10
        bound = int(options.get("max_dist", 3))
        clip = AxisIndex("clip", bound=bound)
        height, width = grid
        cells = [(r, col) for r in range(height) for col in range(width)]
        keys = torch.zeros(n, n, d, dtype=x.dtype)
        for i in range(n):
            for j in range(n):
                if i < prefix or j < prefix:
                    keys[i, j] = rel.prefix_key[0]
                else:
                    (yi, xi), (yj, xj) = cells[i - prefix], cells[j - prefix]
                    s = torch.tensor(_sinusoid(clip(xi - xj), d // 2) + _sinusoid(clip(yi - yj), d // 2), dtype=x.dtype)
                    keys[i, j] = s @ rel.proj.weight.t()
        content = torch.einsum("bhid,bhjd->bhij", q + rel.u, k)
        position = torch.einsum("bhid,ijd->bhij", q + rel.v, keys)
        logits_extra = scale * (content + position) - scale * q @ k.transpose(-2, -1)
    elif spec.name == "sasa":  # Eq. 12
        max_dist = options.get("max_dist")
        rows = AxisIndex("clip", bound=int(max_dist) if max_dist else native_grid[0] - 1)
        cols = AxisIndex("clip", bound=int(max_dist) if max_dist else native_grid[1] - 1)
        row_ids, col_ids = reference_ids("cross", grid, prefix, rows, cols)
        col_ids = col_ids - rel.table_y.shape[0]
        r = torch.cat([rel.table_x[col_ids], rel.table_y[row_ids]], dim=-1)  # N, N, d: concat(p^x, p^y)
        logits_extra = scale * torch.einsum("bhid,ijd->bhij", q, r)
    elif spec.name == "swin":
        rows = AxisIndex("clip", bound=native_grid[0] - 1)
        cols = AxisIndex("clip", bound=native_grid[1] - 1)
        logits_extra = _per_pair_scalar(rel.table, reference_ids("product", grid, prefix, rows, cols))
    else:
        raise KeyError(spec.name)

    logits = scale * q @ k.transpose(-2, -1) + logits_extra
    weights = logits.softmax(-1)
    out = weights @ v
    if value_extra is not None:  # Eq. 17
        out = out + torch.einsum("bhij,hijd->bhid", weights, value_extra)
    return attn.proj(out.transpose(1, 2).reshape(b, n, c))


def _reference_rope(rel, spec: SlotSpec, q, k, grid, prefix: int, d: int):
    """Rotate channel pairs as complex numbers by exp(i (x fx_t + y fy_t))."""
    height, width = grid
    if "mixed" in spec.flags:
        fx, fy = rel.mixed_freqs.unbind(0)  # heads, d/2
    else:
        theta = float(dict(spec.options).get("theta", 100.0))
        quarter = d // 4
        mags = [theta ** (-4 * t / d) for t in range(quarter)]
        fx = torch.tensor([mags + [0.0] * quarter], dtype=q.dtype)
        fy = torch.tensor([[0.0] * quarter + mags], dtype=q.dtype)
    ys = torch.arange(height).repeat_interleave(width).to(q.dtype)
    xs = torch.arange(width).repeat(height).to(q.dtype)
    angles = xs[None, :, None] * fx[:, None, :] + ys[None, :, None] * fy[:, None, :]  # heads, L, d/2
    turn = torch.polar(torch.ones_like(angles), angles)

    def rotate(t):
        cells = torch.view_as_complex(t[..., prefix:, :].reshape(*t.shape[:2], -1, d // 2, 2).contiguous())
        rotated = torch.view_as_real(cells * turn).flatten(-2)
        return torch.cat([t[..., :prefix, :], rotated], dim=-2)

    return rotate(q), rotate(k)
