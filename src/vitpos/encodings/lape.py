"""LaPE (Yu et al., ICCV 2023): an independent LayerNorm for the position embedding in every layer.

Eq. 8-9: the tokens enter block 0 without the encoding (x_0 = alpha) and block l's attention
input is LN_x,l(x_l) + LN_pe,l(pe), where LN_x,l is the block's own ``norm1`` and LN_pe,l a
separate LayerNorm of the *same* pe in every layer; the residual stream carries x only.
Table 5's ablations replace LN_pe,l by simpler transforms (``form=``), Table 6 applies LaPE to
the first ``eta`` layers only, and with a bias-type relative encoding the bias is normalised
over the key axis instead (§3.4, Appendix B).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..attention.terms import RelativeTerms
from ..grid import Grid
from ..padding import Padding
from ..registry import JOIN
from ..spec import SlotSpec, one_of, positive_int
from .base import OptionSchema, SlotContext
from .join import Join, JoinAdditions
from .relative.base import RelativeBias, RelativePosition

if TYPE_CHECKING:
    from ..config import PositionConfig

__all__ = ["FORMS", "PositionNorm", "LapeJoin", "NormalisedBias"]

FORMS: dict[str, tuple[bool, str | None, bool]] = {
    # name: (token-wise normalisation, scale: None | "scalar" | "channel", per-channel shift)
    "identity": (False, None, False),  # omega
    "scalar": (False, "scalar", False),  # gamma omega, gamma a scalar
    "channel": (False, "channel", False),  # gamma * omega
    "affine": (False, "channel", True),  # gamma * omega + beta
    "norm": (True, None, False),  # Norm(omega)
    "scalar_norm": (True, "scalar", False),  # gamma Norm(omega)
    "channel_norm": (True, "channel", False),  # gamma * Norm(omega)
    "ln": (True, "channel", True),  # gamma * Norm(omega) + beta = LN(omega), the method
}
"""LaPE Table 5: the transforms of the position signal, from plain omega to the full LayerNorm."""

PE_EPS = 1e-6
"""LayerNorm epsilon for the absolute encoding: the host's norm1 (and the authors' DeiT) use 1e-6."""
BIAS_EPS = 1e-5
"""LayerNorm epsilon for a relative bias: the authors' ``nn.LayerNorm`` default."""


class PositionNorm(nn.Module):
    """One of :data:`FORMS` for ``layers`` layers at once, each with its own gamma and beta.

    Normalisation runs over the last axis; gamma and beta act along ``channel_axis`` (the
    embedding channels of an absolute encoding, or the heads of a relative bias). Gamma starts
    at 1 and beta at 0, as in ``nn.LayerNorm``.
    """

    def __init__(self, form: str, layers: int, channels: int, eps: float, channel_axis: int = -1) -> None:
        super().__init__()
        self.form, self.layers, self.eps, self.channel_axis = form, layers, eps, channel_axis
        self.normalise, scale, shift = FORMS[form]
        width = channels if scale == "channel" else 1
        self.weight = nn.Parameter(torch.ones(layers, width)) if scale else None
        self.bias = nn.Parameter(torch.zeros(layers, channels)) if shift else None

    def forward(self, x: torch.Tensor, layers: slice = slice(None)) -> torch.Tensor:  # L, *x.shape
        """The transform of ``x`` for each layer in ``layers``, stacked on a new first axis."""
        count = len(range(self.layers)[layers])
        if self.normalise:
            x = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        x = x.unsqueeze(0)
        weight, bias = self._per_layer(self.weight, layers, x.ndim), self._per_layer(self.bias, layers, x.ndim)
        if weight is not None and bias is not None:
            return torch.addcmul(bias, x, weight)
        if weight is not None:
            x = x * weight
        if bias is not None:
            x = x + bias
        return x.expand(count, *x.shape[1:]) if x.shape[0] != count else x

    def _per_layer(self, param: torch.Tensor | None, layers: slice, ndim: int) -> torch.Tensor | None:
        if param is None:
            return None
        shape = [1] * ndim
        shape[0], shape[self.channel_axis] = -1, param.shape[1]
        return param[layers].view(shape)

    def extra_repr(self) -> str:
        return f"form={self.form}, layers={self.layers}, eps={self.eps}"


@JOIN.register("lape")
class LapeJoin(Join):
    """LaPE: block l's attention input is LN_x,l(x) + LN_pe,l(pe); tokens enter without pe.

    Options: ``eta`` (only blocks 0..eta-1 get a position term, later ones none; default all),
    ``form`` (Table 5's transform, default ``ln``), flag ``chained`` (block l normalises block
    l-1's normalised pe instead of pe itself, as the LaPE repository's current code does; Eq. 9
    and its first releases normalise the same pe in every layer, which is the default).

    Prefix rows: LN_pe,l runs over every row of pe, as the authors normalise their whole
    ``pos_embed`` including the class-token row. A learned prefix vector (DeiT) is normalised
    like any cell; a zero prefix row (fixed encodings; the authors' 2-D sinusoidal code also
    uses a zero class-token row) normalises to zero, so prefix tokens receive beta_l.

    With a bias-type relative encoding (:class:`RelativeBias`), blocks 0..eta-1 normalise its
    bias instead (:class:`NormalisedBias`); other relative encodings pass through unchanged.
    Without an absolute encoding (``has_absolute=False``) the join owns no LN_pe parameters.
    """

    _schema: ClassVar[OptionSchema] = {"eta": positive_int, "form": one_of(*FORMS)}

    def __init__(
        self,
        ctx: SlotContext,
        has_absolute: bool = True,
        eta: int | None = None,
        form: str = "ln",
        chained: bool = False,
    ) -> None:
        super().__init__(ctx, has_absolute)
        eta = ctx.depth if eta is None else eta
        if not 1 <= eta <= ctx.depth:
            raise ValueError(f"lape: eta={eta} must be between 1 and the model depth {ctx.depth}")
        self.eta, self.form, self.chained, self.num_heads = eta, form, chained, ctx.num_heads
        # no pe to normalise: no dead parameters
        self.pe_norm = PositionNorm(form, eta, ctx.embed_dim, PE_EPS) if has_absolute else None

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        spec.check_no_placement()
        spec.check_flags({"chained"})
        return {"chained": "chained" in spec.flags, **spec.typed_options(cls._schema)}

    @classmethod
    def check_combination(cls, position: PositionConfig) -> None:
        if position.spec("absolute").name == "none" and position.spec("relative").name == "none":
            raise ValueError(
                "join 'lape' has nothing to normalise with absolute='none' and relative='none'; choose an "
                "absolute encoding (e.g. absolute='learned') or a bias-type relative encoding"
            )

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        # Eq. 8: x_0 = alpha (no entry term); Eq. 9: LN_pe,l(pe) joins block l's attention input
        return JoinAdditions() if pe is None else JoinAdditions(attention=tuple(self.layer_encodings(pe).unbind(0)))

    def layer_encodings(self, pe: torch.Tensor) -> torch.Tensor:  # eta, 1, P + H*W, D
        """LN_pe,l(pe) for l = 0..eta-1 (or the chosen form), stacked."""
        if self.pe_norm is None:
            raise ValueError(
                "this LaPE join was built without an absolute encoding (has_absolute=False); it has no pe to normalise"
            )
        if not self.chained:
            return self.pe_norm(pe)
        layers, current = [], pe
        for layer in range(self.eta):
            current = self.pe_norm(current, slice(layer, layer + 1))[0]
            layers.append(current)
        return torch.stack(layers)

    def adapt_relative(self, index: int, relative: RelativePosition | None) -> RelativePosition | None:
        if not self.has_absolute and not isinstance(relative, RelativeBias):
            raise ValueError(
                f"join 'lape' with absolute='none' normalises a relative bias, but block {index}'s relative "
                f"encoding ({type(relative).__name__}) is not a plain bias (RelativeBias); use a bias-type "
                f"relative encoding or an absolute encoding"
            )
        if isinstance(relative, RelativeBias) and index < self.eta:
            return NormalisedBias(relative, self.form, self.num_heads)
        return relative

    def extra_repr(self) -> str:
        return f"eta={self.eta}, form={self.form}, chained={self.chained}"


class NormalisedBias(RelativeBias):
    """LaPE for a bias-type relative encoding: its bias, layer-normalised over the key axis.

    Only the patch-to-patch block is normalised, as the authors add LN(bias) to
    ``attn[:, :, 1:, 1:]``; rows and columns of prefix tokens pass through unchanged. The
    authors' ``nn.LayerNorm(num_patches)`` learns one gamma and beta per *key*, which ties the
    model to one grid; we learn one gamma and beta per *head* (2 * heads parameters per layer),
    which works at every grid. ``form`` applies Table 5's variants the same way (the "channel"
    of a bias is its head). A bias shared by all heads becomes per-head through gamma and beta.
    """

    def __init__(self, encoding: RelativeBias, form: str, num_heads: int) -> None:
        super().__init__()
        self.encoding = encoding
        self.norm = PositionNorm(form, 1, num_heads, BIAS_EPS, channel_axis=-3)

    def reads_extent(self) -> bool:
        return True

    def padded_terms(
        self, grid: Grid, num_prefix_tokens: int, padding: Padding, device: torch.device | str | None = None
    ) -> tuple[RelativeTerms | None, torch.Tensor | None]:
        """No shared terms: each image's bias normalised over its own valid keys (B, heads, N, N)."""
        return None, padding.place_pairs(lambda size: self.position_bias(size, num_prefix_tokens), num_prefix_tokens)

    def position_bias(self, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # heads, N, N
        p = num_prefix_tokens
        bias = self.encoding.position_bias(grid, p)
        patches = self.norm(bias[:, p:, p:])[0]  # heads, H*W, H*W
        if p == 0:
            return patches
        bias = bias.expand(patches.shape[0], -1, -1)
        lower = torch.cat([bias[:, p:, :p], patches], dim=-1)
        return torch.cat([bias[:, :p], lower], dim=1)
