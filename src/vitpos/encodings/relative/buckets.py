"""Relative-position buckets (iRPE §3.2): index functions and the four 2-D mapping methods.

An *index function* maps a relative distance to an integer in [-b, b]: the clip function h of
Shaw et al. (Eq. 9) or the piecewise function g of Eq. 18. A *mapping method* turns the 2-D
offset between query i and key j into a bucket id I(i, j): Euclidean (Eq. 20), Quantization
(Eq. 21), Cross (Eq. 22-24) or Product (Eq. 25). Every pair that involves a prefix (class)
token gets one extra bucket of its own (iRPE §4.1). Bucket counts never depend on the grid, so
a table learned at 14x14 indexes every other grid.

Choices where the paper leaves room (the authors' released code agrees unless noted):

* Eq. 18 clips to beta; with a non-integer beta (the default ratio 1.9 gives beta = 3.8) the
  codomain {y in Z : |y| <= beta} makes the bound ``b = floor(beta)``. The clip function h
  uses the same beta, so clip and piecewise have the same bucket count (iRPE Table 3).
* Euclidean and Quantization apply g to the distance itself (Eq. 20-21); the released code
  rounds the Euclidean distance before g, which differs only beyond alpha
  (``round_distance=True`` reproduces it). They keep the
  2b + 1 buckets the paper states (ids g + b), although distances are never negative.
* Quantization ranks a distance among *all* distances an integer grid can produce
  (0, 1, sqrt 2, 2, sqrt 5, ... -> 0, 1, 2, 3, 4, ...), so the rank does not depend on the grid.
  The released code feeds the squared distance to g instead: ``quant="squared"``.
* Cross has one table per axis; here both share one id space (rows first, then columns,
  each with its own prefix bucket), so ``num_buckets`` is the paper's total 2 (2b + 1) (+ 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict, Unpack

import torch
import torch.nn.functional as F

from ...attention.terms import RelativeTerms
from ...grid import Grid, GridCache, grid_offsets
from ...memory import check_fits

__all__ = [
    "INDEX_FUNCTIONS",
    "METHODS",
    "QUANT_VARIANTS",
    "IndexFunction",
    "Bucketing",
    "BucketedEncoding",
    "clip_index",
    "piecewise_index",
    "quantize_distance",
    "relative_buckets",
]

INDEX_FUNCTIONS = ("piecewise", "clip")
METHODS = ("euclidean", "quant", "cross", "product")
QUANT_VARIANTS = ("rank", "squared")


def clip_index(x: torch.Tensor, beta: float) -> torch.Tensor:
    """h(x) = max(-b, min(b, x)) rounded to an integer, with b = floor(beta) (Eq. 9)."""
    bound = math.floor(beta)
    return x.to(torch.float64).clamp(-bound, bound).round().long()


def piecewise_index(x: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    """g(x) of Eq. 18: round(x) for |x| <= alpha, logarithmic beyond, clipped to +-floor(beta)."""
    if not 0 < alpha < gamma:
        raise ValueError(f"the piecewise index needs 0 < alpha < gamma, got alpha={alpha}, gamma={gamma}")
    x = x.to(torch.float64)
    bound = math.floor(beta)
    magnitude = x.abs()
    # clamp_min keeps log() finite on the entries the where() below discards
    far = alpha + torch.log(magnitude.clamp_min(alpha) / alpha) / math.log(gamma / alpha) * (beta - alpha)
    far = torch.sign(x) * far.round().clamp_max(bound)
    near = x.round().clamp(-bound, bound)
    return torch.where(magnitude <= alpha, near, far).long()


@dataclass(frozen=True)
class IndexFunction:
    """One index function with its coefficients; ``bound`` = floor(beta) is its largest output."""

    kind: str = "piecewise"
    alpha: float = 1.9
    beta: float = 3.8
    gamma: float = 15.2

    def __post_init__(self) -> None:
        if self.kind not in INDEX_FUNCTIONS:
            raise ValueError(f"unknown index function {self.kind!r}; valid values: {', '.join(INDEX_FUNCTIONS)}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")

    @classmethod
    def from_ratio(cls, kind: str = "piecewise", ratio: float = 1.9) -> IndexFunction:
        """alpha : beta : gamma = 1 : 2 : 8 with alpha = ``ratio`` (iRPE §4.1)."""
        if ratio < 0.5:
            raise ValueError(f"ratio must be >= 0.5 (beta = 2 * ratio >= 1), got {ratio}")
        return cls(kind, ratio, 2.0 * ratio, 8.0 * ratio)

    @classmethod
    def clip_at(cls, bound: int) -> IndexFunction:
        """The clip function h with beta = ``bound`` (alpha and gamma unused)."""
        return cls("clip", bound / 2.0, float(bound), 4.0 * bound)

    @property
    def bound(self) -> int:
        """floor(beta): outputs lie in [-bound, bound]."""
        return math.floor(self.beta)

    @property
    def size(self) -> int:
        """2 * bound + 1 distinct outputs."""
        return 2 * self.bound + 1

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "clip":
            return clip_index(x, self.beta)
        return piecewise_index(x, self.alpha, self.beta, self.gamma)


def quantize_distance(squared: torch.Tensor, variant: str = "rank", *, root_bound: int | None = None) -> torch.Tensor:
    """quant() of Eq. 21 from squared integer distances, as float64.

    ``rank``: the position of the distance among all distances of integer offsets
    (0, 1, sqrt 2, 2, sqrt 5, 2 sqrt 2, 3, ... -> 0, 1, 2, ...). ``squared``: the squared
    distance itself (the authors' released code). ``root_bound``: an integer s with s^2 above
    every entry (a grid's H + W); given, no value is read back, so the ranks trace with
    symbolic grid sizes.
    """
    if variant == "squared":
        return squared.to(torch.float64)
    if variant != "rank":
        raise ValueError(f"unknown quantization {variant!r}; valid values: {', '.join(QUANT_VARIANTS)}")
    if root_bound is None:
        root_bound = math.isqrt(int(squared.max()) if squared.numel() else 0) + 1
    # mark every a^2 + b^2 below 2 s^2 (a, b < s, which holds them all up to s^2), then count the
    # marks below each distance: its rank among attainable distances
    axis = torch.arange(root_bound, device=squared.device) ** 2
    sums = (axis[:, None] + axis[None, :]).flatten()
    attainable = torch.zeros(2 * root_bound * root_bound, dtype=torch.long, device=squared.device).index_fill(
        0, sums, 1
    )
    below = attainable.cumsum(0) - attainable
    return below[squared.long()].to(torch.float64)


@dataclass(frozen=True)
class Bucketing:
    """A mapping method with its index functions: builds and caches the bucket ids of a grid.

    ``index`` applies to distances (Euclidean, Quantization) or to row offsets; ``index_x``,
    if given, to column offsets of the directed methods.
    """

    method: str = "product"
    index: IndexFunction = IndexFunction()
    index_x: IndexFunction | None = None
    quant: str = "rank"
    round_distance: bool = False
    """Euclidean only: round the distance before the index function, as the released code does."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown bucket method {self.method!r}; valid values: {', '.join(METHODS)}")
        if self.quant not in QUANT_VARIANTS:
            raise ValueError(f"unknown quantization {self.quant!r}; valid values: {', '.join(QUANT_VARIANTS)}")
        if self.round_distance and self.method != "euclidean":
            raise ValueError(f"round_distance applies to the euclidean method only, not {self.method!r}")

    @property
    def column_index(self) -> IndexFunction:
        """The index function of column offsets."""
        return self.index_x or self.index

    @property
    def directed(self) -> bool:
        """Cross and Product tell directions apart; Euclidean and Quantization do not."""
        return self.method in ("cross", "product")

    def axis_sizes(self, num_prefix_tokens: int = 0) -> tuple[int, ...]:
        """Buckets per table: (rows, columns) for Cross, one entry otherwise; prefix bucket included."""
        extra = int(num_prefix_tokens > 0)
        if self.method == "cross":
            return (self.index.size + extra, self.column_index.size + extra)
        if self.method == "product":
            return (self.index.size * self.column_index.size + extra,)
        return (self.index.size + extra,)

    def num_buckets(self, num_prefix_tokens: int = 0) -> int:
        """Total buckets on any grid, one extra (per table) when there are prefix tokens."""
        return sum(self.axis_sizes(num_prefix_tokens))

    def build(self, grid: Grid, num_prefix_tokens: int = 0, device=None) -> torch.Tensor:
        """Bucket ids: (N, N), or (2, N, N) for Cross; N = num_prefix_tokens + H*W."""
        h, w = _check_grid(grid)
        if num_prefix_tokens < 0:
            raise ValueError(f"num_prefix_tokens must be >= 0, got {num_prefix_tokens}")
        offsets = grid_offsets((h, w), device=device)  # query minus key, (dy, dx)
        dy, dx = offsets.unbind(-1)
        rows, cols = self.index, self.column_index
        if self.method == "product":
            maps = [(rows(dy) + rows.bound) * cols.size + cols(dx) + cols.bound]
        elif self.method == "cross":
            maps = [rows(dy) + rows.bound, cols(dx) + cols.bound]
        elif self.method == "euclidean":
            distance = (dy**2 + dx**2).to(torch.float64).sqrt()
            maps = [rows(distance.round() if self.round_distance else distance) + rows.bound]
        else:
            maps = [rows(quantize_distance(dy**2 + dx**2, self.quant, root_bound=h + w)) + rows.bound]
        sizes, start, out = self.axis_sizes(num_prefix_tokens), 0, []
        for ids, size in zip(maps, sizes, strict=True):
            out.append(_add_prefix_bucket(ids, size - 1, num_prefix_tokens) + start)
            start += size
        return torch.stack(out) if self.method == "cross" else out[0]

    def ids(self, grid: Grid, num_prefix_tokens: int, device=None) -> torch.Tensor:
        """:meth:`build`, cached per (grid, prefix count, device)."""
        key = (self, tuple(grid), num_prefix_tokens, torch.device(device) if device is not None else None)
        return _BUCKET_IDS.get(key, lambda: self.build(grid, num_prefix_tokens, device))


_BUCKET_IDS: GridCache[torch.Tensor] = GridCache(maxsize=64)
"""Shared by every layer: ids depend only on the bucketing, grid, prefix count and device."""


def _check_grid(grid: Grid) -> tuple[int, int]:
    if len(grid) != 2 or any(s < 1 or (not isinstance(s, torch.SymInt) and int(s) != s) for s in grid):
        raise ValueError(f"grid must be (H, W) with positive integers, got {grid!r}")
    # symbolic sizes (tracing) stay symbolic: int() would fix the traced graph to one grid
    h, w = (s if isinstance(s, torch.SymInt) else int(s) for s in grid)
    return h, w


def _add_prefix_bucket(ids: torch.Tensor, extra_id: int, num_prefix_tokens: int) -> torch.Tensor:
    """Pad (L, L) ids to (P + L, P + L); every pair involving a prefix token gets ``extra_id``."""
    if num_prefix_tokens == 0:
        return ids
    p = num_prefix_tokens
    return F.pad(ids, (p, 0, p, 0), value=extra_id)


def relative_buckets(
    method: str,
    grid: Grid,
    *,
    ratio: float = 1.9,
    index: str = "piecewise",
    num_prefix_tokens: int = 0,
    quant: str = "rank",
    round_distance: bool = False,
) -> tuple[torch.Tensor, int]:
    """iRPE bucket ids of every (query, key) pair on ``grid`` and the number of buckets.

    The options are those of the slot string: ``index="clip"`` (``:clip``), ``quant="squared"``
    (``:squared``), ``round_distance=True`` (``:round``, Euclidean only), ``ratio`` (``:ratio=``).

    Returns ids of shape (N, N) — (2, N, N) for ``cross``, row ids then column ids in one id
    space — with N = num_prefix_tokens + H*W, and ``num_buckets`` (grid-independent; for
    ``cross`` the total over both tables). alpha : beta : gamma = 1 : 2 : 8 with alpha = ``ratio``.
    """
    bucketing = Bucketing(method, IndexFunction.from_ratio(index, ratio), quant=quant, round_distance=round_distance)
    h, w = _check_grid(grid)
    n = num_prefix_tokens + h * w
    check_fits(
        f"iRPE bucket ids for a {h}x{w} grid ({n} tokens, {n}^2 pairs)",
        n * n * 8 * (2 if method == "cross" else 1),
        "use a smaller grid",
    )
    return bucketing.build(grid, num_prefix_tokens), bucketing.num_buckets(num_prefix_tokens)


class BucketTables(TypedDict, total=False):
    """The tables of :class:`~vitpos.attention.terms.RelativeTerms` an encoding may set beside its ids."""

    bias_table: torch.Tensor | None
    key_table: torch.Tensor | None
    query_table: torch.Tensor | None
    value_table: torch.Tensor | None
    query_shift: torch.Tensor | None


class BucketedEncoding:
    """Mixin for encodings indexed by a :class:`Bucketing`: bucket count, prefix check and
    the per-grid bucket ids (cached, shared by every layer with the same bucketing)."""

    bucketing: Bucketing
    num_buckets: int
    prefix_bucket: bool

    def init_buckets(self, bucketing: Bucketing, num_prefix_tokens: int) -> None:
        """Fix the bucketing; the tables get one extra bucket when the model has prefix tokens."""
        self.bucketing = bucketing
        self.num_buckets = bucketing.num_buckets(num_prefix_tokens)
        self.prefix_bucket = num_prefix_tokens > 0

    def bucket_ids(self, grid: Grid, num_prefix_tokens: int, device=None) -> torch.Tensor:
        """Cached ids for ``grid``: (N, N), or (2, N, N) for the Cross method."""
        if num_prefix_tokens and not self.prefix_bucket:
            raise ValueError(
                f"this {type(self).__name__} was built for a model without prefix tokens and has no bucket "
                f"for them, but got num_prefix_tokens={num_prefix_tokens}; build it with the model's context"
            )
        return self.bucketing.ids(grid, num_prefix_tokens, device)

    def bucket_terms(
        self, grid: Grid, num_prefix_tokens: int, device=None, **tables: Unpack[BucketTables]
    ) -> RelativeTerms:
        """:class:`RelativeTerms` with this encoding's ids and the given tables."""
        ids = self.bucket_ids(grid, num_prefix_tokens, device)
        return RelativeTerms(ids=ids, num_buckets=self.num_buckets, **tables)
