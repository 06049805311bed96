"""The efficient bucket lookups of iRPE §3.2 (Eq. 26-28), shared by every bucketed encoding.

Shapes: q, k (B, heads, N, d); a contextual table (K, d) shared by the heads or (heads, K, d);
a bias table (heads or 1, K); ids (N, N) or, for the Cross method, (2, N, N) whose two maps are
summed. No function here builds an N x N x d tensor: products with the table are taken onto the
K buckets first (O(N K d)) and then gathered by bucket id (O(N^2)).
"""

from __future__ import annotations

import torch

from ...grid import Grid
from .index import Bucketing

__all__ = ["BucketLookup", "bucket_maps", "gather_buckets", "key_term", "query_term", "value_term", "bias_term"]


def bucket_maps(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The (N, N) id maps whose lookups are summed: one, or two for the Cross method."""
    return tuple(ids) if ids.ndim == 3 else (ids,)


def gather_buckets(scores: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """y_ij = sum over maps of scores[..., i, I(i, j)] (Eq. 28); scores (B, h, N, K) -> (B, h, N, N)."""
    out = None
    for id_map in bucket_maps(ids):
        term = scores.gather(-1, id_map.expand(*scores.shape[:-1], id_map.shape[-1]))
        out = term if out is None else out + term
    return out


def key_term(q: torch.Tensor, table: torch.Tensor, ids: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * q_i . p_{I(i,j)}: a contextual encoding on keys (Eq. 15), in logit units."""
    # scaling the K x d table is cheaper than scaling the B x h x N x d queries
    return gather_buckets(q @ (table * scale).transpose(-2, -1), ids)


def query_term(k: torch.Tensor, table: torch.Tensor, ids_transposed: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * k_j . p_{I(i,j)}: a contextual encoding on queries (Eq. 16); ids given key-major."""
    return key_term(k, table, ids_transposed, scale).transpose(-2, -1)


def value_term(attn: torch.Tensor, table: torch.Tensor, ids: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """sum_j alpha_ij p_{I(i,j)} (Eq. 17): attention summed per bucket, then one matmul."""
    weights = attn.new_zeros(*attn.shape[:-1], num_buckets)
    for id_map in bucket_maps(ids):
        weights = weights.scatter_add(-1, id_map.expand_as(attn), attn)
    return weights @ table.to(attn.dtype)


def bias_term(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """b_ij = r_{I(i,j)} (Eq. 14): (heads or 1, K) table -> (heads or 1, N, N)."""
    out = None
    for id_map in bucket_maps(ids):
        term = table[:, id_map]
        out = term if out is None else out + term
    return out


class BucketLookup:
    """Mixin for encodings indexed by a :class:`~.index.Bucketing`: cached ids and a prefix check."""

    bucketing: Bucketing
    num_buckets: int
    prefix_bucket: bool

    def init_buckets(self, bucketing: Bucketing, num_prefix_tokens: int) -> None:
        """Fix the bucketing; the tables get one extra bucket when the model has prefix tokens."""
        self.bucketing = bucketing
        self.num_buckets = bucketing.num_buckets(num_prefix_tokens)
        self.prefix_bucket = num_prefix_tokens > 0

    def bucket_ids(self, grid: Grid, num_prefix_tokens: int, device, *, transposed: bool = False) -> torch.Tensor:
        """Cached ids for ``grid``; ``transposed`` gives them key-major (for terms on queries)."""
        if num_prefix_tokens and not self.prefix_bucket:
            raise ValueError(
                f"this {type(self).__name__} was built for a model without prefix tokens and has no bucket "
                f"for them, but got num_prefix_tokens={num_prefix_tokens}; build it with the model's context"
            )
        return self.bucketing.ids(grid, num_prefix_tokens, device, transposed=transposed)
