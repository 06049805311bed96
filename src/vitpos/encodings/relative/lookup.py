"""The efficient bucket lookups of iRPE §3.2 (Eq. 26-28), shared by every bucketed encoding.

Shapes: q, k (B, heads, N, d); a contextual table (K, d) shared by the heads or (heads, K, d);
a bias table (heads or 1, K); ids (N, N) or, for the Cross method, (2, N, N) whose two maps are
summed. No function here builds an N x N x d tensor: products with the table are taken onto the
K buckets first (O(N K d)) and then looked up by bucket id (O(N^2)).

An encoding states its terms once, in bucket form (:class:`BucketTerms`); the host's attention
looks them up into (B, heads, N, N) logits (:func:`bucket_logits`), or
:meth:`BucketLookup.attend` hands them to :mod:`.chunked`, which never builds those logits for
backward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...grid import Grid
from .chunked import BucketIndex, chunked_attention, lookup
from .index import Bucketing

__all__ = [
    "BucketLookup",
    "BucketTerms",
    "bucket_maps",
    "bucket_scores",
    "bucket_logits",
    "value_term",
    "bias_term",
]


def bucket_maps(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The (N, N) id maps whose lookups are summed: one, or two for the Cross method."""
    return tuple(ids) if ids.ndim == 3 else (ids,)


def bucket_scores(x: torch.Tensor, table: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * x . p_K for every bucket K (Eq. 27): (B, h, N, d) x (K, d) or (h, K, d) -> (B, h, N, K)."""
    # scaling the K x d table is cheaper than scaling the B x h x N x d tokens
    return x @ (table * scale).transpose(-2, -1)


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


@dataclass
class BucketTerms:
    """The relative terms of one attention call in bucket form, all in logit units.

    ``row`` (broadcastable to (B, heads, N, K)) is looked up per query, R[i, I(i, j)]: terms on
    keys (scale q . P^T) and per-bucket biases. ``col`` is looked up per key, C[j, I(i, j)]:
    terms on queries (scale k . P^T). ``value_table`` (K, d) or (heads, K, d) gives the term on
    values; ``query``, if set, replaces q in the content product q . k (Transformer-XL's q + u).
    """

    row: torch.Tensor | None = None
    col: torch.Tensor | None = None
    value_table: torch.Tensor | None = None
    query: torch.Tensor | None = None


def bucket_logits(terms: BucketTerms, ids: torch.Tensor) -> torch.Tensor | None:
    """y_ij = sum over maps of R[i, I(i, j)] + C[j, I(i, j)] (Eq. 28): the (B, heads, N, N) logits
    of ``terms.row`` and ``terms.col``, or None."""
    scores = [t for t in (terms.row, terms.col) if t is not None]
    if not scores:
        return None
    index, everything, n = BucketIndex(ids, scores[0].shape[-1]), slice(None), ids.shape[-1]
    out = None
    if terms.row is not None:
        out = lookup(terms.row, index.rows(everything, per_query=terms.row.shape[-2] != 1), n)
    if terms.col is not None:
        term = lookup(terms.col, index.columns(everything), n)
        out = term if out is None else out + term
    return out


class BucketLookup:
    """Mixin for encodings indexed by a :class:`~.index.Bucketing`: cached ids, a prefix check and
    the memory-efficient attention of long sequences (subclasses state :meth:`bucket_terms`)."""

    bucketing: Bucketing
    num_buckets: int
    prefix_bucket: bool
    memory_efficient: bool | None

    def init_buckets(self, bucketing: Bucketing, num_prefix_tokens: int) -> None:
        """Fix the bucketing; the tables get one extra bucket when the model has prefix tokens."""
        self.bucketing = bucketing
        self.num_buckets = bucketing.num_buckets(num_prefix_tokens)
        self.prefix_bucket = num_prefix_tokens > 0

    def bucket_ids(self, grid: Grid, num_prefix_tokens: int, device) -> torch.Tensor:
        """Cached ids for ``grid``."""
        if num_prefix_tokens and not self.prefix_bucket:
            raise ValueError(
                f"this {type(self).__name__} was built for a model without prefix tokens and has no bucket "
                f"for them, but got num_prefix_tokens={num_prefix_tokens}; build it with the model's context"
            )
        return self.bucketing.ids(grid, num_prefix_tokens, device)

    def bucket_terms(self, q: torch.Tensor, k: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float) -> BucketTerms:
        """This encoding's terms for queries ``q`` and keys ``k``."""
        raise NotImplementedError

    def lookup_logits(self, terms: BucketTerms, grid: Grid, num_prefix_tokens: int, device) -> torch.Tensor | None:
        """:func:`bucket_logits` of ``terms`` with this encoding's ids (the host's attention)."""
        return bucket_logits(terms, self.bucket_ids(grid, num_prefix_tokens, device))

    computes_attention = True

    def attend_in_mode(
        self, mode: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float
    ) -> torch.Tensor:
        """Attention by :func:`.chunked.chunked_attention` with this encoding's bucket terms."""
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # one copy each, shared by every product
        terms = self.bucket_terms(q, k, grid, num_prefix_tokens, scale)
        out, weights = chunked_attention(
            q if terms.query is None else terms.query, k, v, scale, self.bucket_ids(grid, num_prefix_tokens, q.device),
            num_buckets=self.num_buckets, row_scores=terms.row, col_scores=terms.col,
            bucket_weights=terms.value_table is not None, mode=mode,
        )  # fmt: skip
        if weights is not None:
            out = out + weights @ terms.value_table.to(weights.dtype)
        return out
