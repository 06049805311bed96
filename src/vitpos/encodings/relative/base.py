"""The interface a relative encoding implements for :class:`vitpos.models.layers.Attention`."""

from __future__ import annotations

import torch
from torch import nn

from ...grid import Grid
from ...registry import RELATIVE
from ...spec import SlotSpec
from ..base import SlotContext, SlotEntry
from .chunked import attention_mode, chunked_attention

__all__ = ["RelativePosition", "RelativeBias", "NoRelative"]


class RelativePosition(SlotEntry, nn.Module):
    """Base class; one instance per attention layer. Shapes: q, k, v are (B, heads, N, head_dim)
    with N = num_prefix_tokens + H*W.

    Attention calls, in order: :meth:`rotate` on q and k; :meth:`attend`, which may compute the
    whole attention itself (the memory-efficient path of long sequences); otherwise
    :meth:`logit_bias`, whose result (broadcastable to (B, heads, N, N), in logit units, i.e.
    after the 1/sqrt(d) scale) is added to the logits, and, when :attr:`needs_attention_weights`
    is true, it computes the attention weights explicitly and adds :meth:`value_term`.
    """

    needs_attention_weights: bool = False
    memory_efficient: bool | None = None
    """Query-chunked attention (:mod:`.chunked`): None follows its length policy, True / False force it on / off."""

    def rotate(self, q: torch.Tensor, k: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transform queries and keys before the dot product (rotary encodings)."""
        return q, k

    computes_attention: bool = False
    """True for encodings that can compute the whole attention (:meth:`attend_in_mode`)."""

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float
    ) -> torch.Tensor | None:
        """The attention output (B, heads, N, d) computed by the encoding where the policy of
        :func:`.chunked.attention_mode` picks a mode for this call, or None to let the host do it."""
        if not self.computes_attention:
            return None
        # with a term on values the host cannot use its fused kernel: without a gradient too,
        # the encoding's own stored path is then the faster one
        mode = attention_mode(
            self.memory_efficient, q.shape[-2], q, k, v, *self.parameters(), host_fuses=not self.needs_attention_weights
        )  # fmt: skip
        return None if mode is None else self.attend_in_mode(mode, q, k, v, grid, num_prefix_tokens, scale)

    def attend_in_mode(
        self, mode: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float
    ) -> torch.Tensor:
        """The attention output by :func:`.chunked.chunked_attention` in ``mode`` ('chunked' or 'stored')."""
        raise NotImplementedError

    def logit_bias(self, q: torch.Tensor, k: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float) -> torch.Tensor | None:
        """Additive logit term, or None."""
        return None

    def value_term(self, attn: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor | None:
        """Term added to ``attn @ v`` given the attention weights (B, heads, N, N), or None."""
        return None


class RelativeBias(RelativePosition):
    """A relative encoding whose whole effect is a content-independent logit bias.

    Subclasses implement :meth:`position_bias`; joins such as LaPE may transform that bias
    (see :meth:`vitpos.encodings.join.Join.adapt_relative`).
    """

    def position_bias(self, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # heads or 1, N, N
        """The bias added to the logits of every (query, key) pair, in logit units."""
        raise NotImplementedError

    def logit_bias(self, q: torch.Tensor, k: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float) -> torch.Tensor:
        return self.position_bias(grid, num_prefix_tokens).unsqueeze(0)

    computes_attention = True

    def attend_in_mode(
        self, mode: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grid: Grid, num_prefix_tokens: int, scale: float
    ) -> torch.Tensor:
        return chunked_attention(q, k, v, scale, bias=self.position_bias(grid, num_prefix_tokens), mode=mode)[0]


@RELATIVE.register("none")
class NoRelative(SlotEntry):
    """No relative encoding."""

    @classmethod
    def from_spec(cls, spec: SlotSpec, ctx: SlotContext, layer: int = 0) -> None:
        return None
