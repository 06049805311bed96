"""The relative encodings iRPE compares against (Table 5), and the Swin-style bias table.

Shaw, Transformer-XL and Huang were written for 1-D text; as in iRPE's supplement §4 they are
carried to 2-D with the Product method and the clip function h, one table shared by the heads
(``max_dist`` = beta of h, default 3: 7 x 7 = 49 offsets, 50 buckets with the prefix bucket, as
iRPE's own comparisons). SASA is 2-D already and splits the key encoding into an x and a y half.
Every pair that involves a prefix token uses one extra bucket, as in iRPE. Learnable tables
start at zero like iRPE's (supplement §2), except the Swin table (trunc-normal, std 0.02, as in
Swin) and W^R (initialised like the other projections).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...attention.terms import RelativeTerms
from ...grid import Grid
from ...registry import RELATIVE
from ...spec import SlotSpec, positive_int
from ..base import SlotContext
from ..sincos import sincos_1d
from .base import RelativeBias, RelativePosition
from .buckets import BucketedEncoding, Bucketing, IndexFunction
from .irpe import IRPEContextual, IRPEOptions

__all__ = ["ShawRelative", "TransformerXLRelative", "HuangRelative", "SASARelative", "SwinRelativeBias"]

DEFAULT_MAX_DIST = 3


class _ClippedEncoding:
    """Slot-string handling shared by the clipped baselines: only ``max_dist=K`` is accepted."""

    default_max_dist: int | None = DEFAULT_MAX_DIST

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        spec.check_no_placement()
        spec.check_flags(set())
        return {"max_dist": spec.typed_options({"max_dist": positive_int}).get("max_dist", cls.default_max_dist)}


def _clipped_product(max_dist: int) -> Bucketing:
    """Product buckets over offsets clipped to +-max_dist on each axis."""
    return Bucketing("product", IndexFunction.clip_at(max_dist))


@RELATIVE.register("shaw")
class ShawRelative(_ClippedEncoding, IRPEContextual):
    """Shaw et al. 2018 (Eq. 7-8): learnable vectors on keys and values, clip index."""

    def __init__(self, ctx: SlotContext, max_dist: int = DEFAULT_MAX_DIST) -> None:
        super().__init__(ctx, IRPEOptions(method="product", mode="ctx", on="kv", index="clip", ratio=max_dist / 2))


@RELATIVE.register("huang")
class HuangRelative(_ClippedEncoding, BucketedEncoding, RelativePosition):
    """Huang et al. 2020 (Eq. 11): one vector p_ij shared by queries and keys.

    (q_i + p_ij)(k_j + p_ij)^T - p_ij p_ij^T = q_i k_j^T + q_i p_ij^T + p_ij k_j^T, so the
    extra logits are a contextual term on keys plus one on queries, with the same table.
    """

    def __init__(self, ctx: SlotContext, max_dist: int = DEFAULT_MAX_DIST) -> None:
        super().__init__()
        self.init_buckets(_clipped_product(max_dist), ctx.num_prefix_tokens)
        self.table = nn.Parameter(torch.zeros(self.num_buckets, ctx.head_dim))

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        return self.bucket_terms(grid, num_prefix_tokens, device, key_table=self.table, query_table=self.table)


def offset_sinusoids(max_dist: int, dim: int) -> torch.Tensor:
    """Fixed encodings s of the Product buckets' 2-D offsets: 1-D sinusoids of dx then dy; (K, dim)."""
    if dim % 4:
        raise ValueError(f"the 2-D offset sinusoids need a head width divisible by 4, got {dim}")
    side = 2 * max_dist + 1
    t = torch.arange(side * side)
    dy, dx = t // side - max_dist, t % side - max_dist  # the Product id layout of buckets.py
    return torch.cat([sincos_1d(dx, dim // 2), sincos_1d(dy, dim // 2)], dim=-1)


@RELATIVE.register("xl")
class TransformerXLRelative(_ClippedEncoding, BucketedEncoding, RelativePosition):
    """Transformer-XL (Dai et al. 2019, Eq. 10): content bias u, position bias v, keys s W^R.

    e_ij = [(q_i + u) k_j^T + (q_i + v)(s_{I(i,j)} W^R)^T] / sqrt(d), with s the fixed sinusoid
    of the clipped 2-D offset; u, v and W^R (d x d) are shared by the heads. The prefix bucket
    has no offset to encode, so its key is a learnable vector (zero at start).
    """

    def __init__(self, ctx: SlotContext, max_dist: int = DEFAULT_MAX_DIST) -> None:
        super().__init__()
        self.init_buckets(_clipped_product(max_dist), ctx.num_prefix_tokens)
        d = ctx.head_dim
        self.scale = d**-0.5  # the attention's scale, for the bias per bucket
        # kept exact in float64 and cast to the projection's dtype at use
        self.register_buffer("sinusoids", offset_sinusoids(max_dist, d), persistent=False)
        self.u = nn.Parameter(torch.zeros(d))
        self.v = nn.Parameter(torch.zeros(d))
        self.proj = nn.Linear(d, d, bias=False)  # W^R
        nn.init.trunc_normal_(self.proj.weight, std=0.02)
        self.prefix_key = nn.Parameter(torch.zeros(1, d)) if self.prefix_bucket else None

    def position_keys(self) -> torch.Tensor:  # K, d
        """s W^R for every bucket, then the prefix bucket's key."""
        keys = self.proj(self.sinusoids.to(self.proj.weight.dtype))
        return keys if self.prefix_key is None else torch.cat([keys, self.prefix_key], dim=0)

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        keys = self.position_keys()
        # (q_i + v) . s W^R = q_i . s W^R + v . s W^R: a term on keys plus a bias per bucket
        return self.bucket_terms(
            grid,
            num_prefix_tokens,
            device,
            key_table=keys,
            bias_table=(keys @ (self.v * self.scale))[None],
            query_shift=self.u,
        )


@RELATIVE.register("sasa")
class SASARelative(_ClippedEncoding, BucketedEncoding, RelativePosition):
    """SASA (Ramachandran et al. 2019, Eq. 12): keys get concat(p^x_dx, p^y_dy), d/2 each.

    Offsets are clipped per axis at ``max_dist``, by default at the training grid's extent, so
    every offset of the training grid has its own embedding and larger grids reuse the edge ones.
    """

    default_max_dist = None

    def __init__(self, ctx: SlotContext, max_dist: int | None = None) -> None:
        super().__init__()
        if ctx.head_dim % 2:
            raise ValueError(f"sasa splits each head in an x and a y half; head width {ctx.head_dim} is odd")
        rows, cols = (max_dist, max_dist) if max_dist else (ctx.grid[0] - 1, ctx.grid[1] - 1)
        bucketing = Bucketing("cross", IndexFunction.clip_at(rows), IndexFunction.clip_at(cols))
        self.init_buckets(bucketing, ctx.num_prefix_tokens)
        size_y, size_x = bucketing.axis_sizes(ctx.num_prefix_tokens)
        self.table_x = nn.Parameter(torch.zeros(size_x, ctx.head_dim // 2))
        self.table_y = nn.Parameter(torch.zeros(size_y, ctx.head_dim // 2))

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        half = self.table_x.shape[-1]
        # Cross ids put row (y) buckets first, column (x) buckets after them; a y bucket meets the
        # second half of q (p^y), an x bucket the first half (p^x)
        keys = torch.cat([F.pad(self.table_y, (half, 0)), F.pad(self.table_x, (0, half))])
        return self.bucket_terms(grid, num_prefix_tokens, device, key_table=keys)


@RELATIVE.register("swin")
class SwinRelativeBias(BucketedEncoding, RelativeBias):
    """Swin-style bias (Liu et al. 2021): a learned scalar per head for every 2-D offset.

    The table covers the (2H - 1)(2W - 1) offsets of the training grid (H, W); larger grids
    clip their offsets to it. The bias enters the logits as it is, as in Swin.
    """

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__()
        rows, cols = ctx.grid[0] - 1, ctx.grid[1] - 1
        self.init_buckets(
            Bucketing("product", IndexFunction.clip_at(rows), IndexFunction.clip_at(cols)), ctx.num_prefix_tokens
        )
        self.table = nn.Parameter(torch.empty(ctx.num_heads, self.num_buckets))
        nn.init.trunc_normal_(self.table, std=0.02)

    def bucket_bias_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        return self.bucket_terms(grid, num_prefix_tokens, device, bias_table=self.table)
