"""The interface of a relative encoding: it declares its terms, the attention kernel computes.

An encoding's :meth:`RelativePosition.relative_terms` returns, per grid and prefix count, a
:class:`vitpos.attention.RelativeTerms` (bucket ids, tables, a rotation); it never computes
attention. :func:`vitpos.attention.attention` consumes the terms on every host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from ...attention.terms import RelativeTerms
from ...grid import Grid, GridCache
from ...padding import Padding
from ...registry import RELATIVE
from ..base import SlotContext, SlotEntry

__all__ = ["RelativePosition", "RelativeBias", "NoRelative"]


class RelativePosition(SlotEntry, nn.Module):
    """Base class; one instance per attention layer. N = num_prefix_tokens + H*W tokens.

    A stage builds one per block: ``build(ctx, options, layer=i)``.
    """

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], layer: int = 0, **host: Any) -> Any:
        """The encoding of block ``layer`` from parsed ``options`` (every block gets its own tables)."""
        construct: Callable[..., object] = cls  # the concrete encoding's constructor: (ctx, **options)
        return construct(ctx, **options)

    def relative_terms(
        self, grid: Grid, num_prefix_tokens: int, device: torch.device | str | None = None
    ) -> RelativeTerms:
        """This encoding's terms for ``grid`` with ``num_prefix_tokens`` prefix tokens, on ``device``."""
        raise NotImplementedError

    def reads_extent(self) -> bool:
        """True where the terms depend on the grid's extent, not only on the cells' offsets (a bias normalised
        over its keys, offsets scaled by the grid's size): a grid padded to whole windows would change them."""
        return False

    def padded_terms(
        self, grid: Grid, num_prefix_tokens: int, padding: Padding, device: torch.device | str | None = None
    ) -> tuple[RelativeTerms | None, torch.Tensor | None]:
        """The terms for a padded batch on ``grid`` and a per-image logit bias (B, heads, N, N) or None.

        Terms read from the offsets of cells (bucket ids, tables, rotations) are the same for a
        cell pair of the padded grid as for that pair of the image alone, as padding sits after the
        valid rows and columns: by default the terms of ``grid``. An encoding whose terms depend on
        the grid's extent (a bias normalised over the keys) gives each image its own.
        """
        return self.relative_terms(grid, num_prefix_tokens, device), None


class RelativeBias(RelativePosition):
    """A relative encoding whose whole effect is a content-independent logit bias.

    Subclasses implement :meth:`position_bias` (dense) or :meth:`bucket_bias_terms` (per bucket;
    the dense bias is then read from it); joins such as LaPE may transform the dense bias (see
    :meth:`vitpos.encodings.join.Join.adapt_relative`). While the tables need a gradient the
    terms are per bucket where a bucket form exists (their gradient is summed onto the buckets);
    otherwise they are the dense bias, cached per grid (``python -m bench.attention.caches``: rebuilding it
    in every layer costs 2-3% of a DeiT-S inference forward; see BENCHMARKS.md).
    """

    def __init__(self) -> None:
        super().__init__()
        self._dense: GridCache[torch.Tensor] = GridCache()

    def position_bias(self, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # heads or 1, N, N
        """The bias added to the logits of every (query, key) pair, in logit units."""
        bucketed = self.bucket_bias_terms(grid, num_prefix_tokens, next(self.parameters()).device)
        if bucketed is None:
            raise NotImplementedError(f"{type(self).__name__} defines neither position_bias nor bucket_bias_terms")
        bias = bucketed.logits(None, None, 1.0)
        assert bias is not None  # bucket_bias_terms holds a bias table
        return bias[0]

    def bucket_bias_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms | None:
        """The bias per bucket, or None where it has no bucket form."""
        return None

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        params = list(self.parameters())
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            bucketed = self.bucket_bias_terms(grid, num_prefix_tokens, device)
            if bucketed is not None:
                return bucketed
        key = (tuple(grid), num_prefix_tokens, *((params[0].device, params[0].dtype) if params else ()))
        return RelativeTerms(bias=self._dense.get(key, lambda: self.position_bias(grid, num_prefix_tokens), params))


@RELATIVE.register("none")
class NoRelative(SlotEntry):
    """No relative encoding."""

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], layer: int = 0, **host: Any) -> None:
        return None
