"""Flat bucket lookups (iRPE §3.2, Eq. 26-28): scores per bucket read at every (query, key) pair.

Shapes: per-bucket scores (..., R, K) with R = N (one row per query or key) or 1 (shared by all
queries); ids (N, N) or, for the Cross method, (2, N, N) whose two maps are summed. A row lookup
reads R[i, I(i, j)], a column lookup C[j, I(i, j)]; both are one ``index_select`` per map on the
flattened (R * K) scores, and their reverse one ``index_add_``.
"""

from __future__ import annotations

import torch

__all__ = ["BucketIndex", "lookup", "add_at"]


class BucketIndex:
    """Flat lookup indices into (..., N or 1, K) scores for a chunk of queries.

    A row lookup reads R[i, I(i, j)] at i' * K + I(i, j), with i' the query's place in the
    chunk (or 0 for scores shared by all queries); a column lookup reads C[j, I(i, j)] at
    j * K + I(i, j). Both give the (chunk, N) result in query-major order directly.
    """

    def __init__(self, ids: torch.Tensor, num_buckets: int) -> None:
        self.maps = ids if ids.ndim == 3 else ids.unsqueeze(0)  # M, N, N
        self.num_buckets = num_buckets
        self.key_offsets = torch.arange(self.maps.shape[-1], device=ids.device) * num_buckets

    def rows(self, rows: slice, per_query: bool = True) -> torch.Tensor:  # M, chunk * N
        """Indices of a row lookup for the queries ``rows``."""
        ids = self.maps[:, rows]
        if per_query:
            ids = ids + self.key_offsets[: ids.shape[1], None]
        return ids.reshape(ids.shape[0], -1)

    def columns(self, rows: slice) -> torch.Tensor:  # M, chunk * N
        """Indices of a column lookup for the queries ``rows``."""
        ids = self.maps[:, rows] + self.key_offsets
        return ids.reshape(ids.shape[0], -1)


def lookup(scores: torch.Tensor, index: torch.Tensor, cols: int) -> torch.Tensor:
    """Scores (..., R, K) read at the flat ``index`` (M, chunk * cols), summed over maps: (..., chunk, cols)."""
    lead = scores.shape[:-2]
    flat = scores.reshape(-1, scores.shape[-2] * scores.shape[-1])
    maps = iter(index)
    out = flat.index_select(1, next(maps))
    for id_map in maps:
        out.add_(flat.index_select(1, id_map))
    return out.view(*lead, -1, cols)


def add_at(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """target (..., R, K) += values (..., chunk, C) at the flat ``index``, in place; the reverse of :func:`lookup`."""
    flat = target.view(-1, target.shape[-2] * target.shape[-1])
    source = values.reshape(flat.shape[0], -1)
    for id_map in index:
        flat.index_add_(1, id_map, source)
    return target
