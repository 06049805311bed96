"""CPVT's Position Encoding Generator (Chu et al., ICLR 2023), registered as ``peg``.

A PEG reshapes the patch tokens to their grid (B, C, H, W), applies a function F and adds it
back: ``x + F(x)``. Prefix (class) tokens pass through untouched. The slot string chooses F,
the padding, freezing and where PEGs go (one PEG module per position)::

    peg                 one depthwise 3x3 conv with bias after block 0 (the paper's default)
    peg@0-5             one PEG after each of blocks 0..4 (CPVT-GAP, Tables 3, 7, 12)
    peg@-1:k=27         a 27x27 depthwise conv on the patch tokens before block 0 (Table 6)
    peg@0:dense         one dense 3x3 conv (Table 14)
    peg@0:dw*4          4 x (depthwise 3x3 + BatchNorm + ReLU) (Table 14); ``dense*4`` likewise
    peg@0:frozen        weights fixed at their initial (or loaded) values (Table 5)
    peg@0:pad=circular  no zero padding (Table 11 ablation); also ``replicate``, ``reflect``

Padding is ``(k-1)/2`` cells per side so that the residual keeps the grid. Zero padding
(``pad=zeros``, the default) is what lets border tokens, and from them all tokens, learn
their absolute position; the paper's Table 11 removes it, and we realise "no zero padding"
as circular padding (wrap-around: no cell is special, so F is exactly equivariant to cyclic
shifts) or replicate/reflect padding (copies of the border). Circular and reflect padding need
``(k-1)/2`` smaller than the grid side (reflect) or at most the side (circular).

Parameters (D = width): ``dw`` adds (k^2 + 1)·D per PEG, e.g. 1,920 for CPVT-Ti (Table 8);
``dense`` (k^2·D + 1)·D; ``dw*n`` n·(k^2 + 3)·D and ``dense*n`` n·(k^2·D + 3)·D (conv bias and
BatchNorm scale and shift). Weights keep PyTorch's default convolution initialisation, as in
the paper's code; ``k=1`` gives its Table 5 control (convolutions with no neighbourhood).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..grid import Grid, map_to_tokens, tokens_to_map
from ..padding import Padding
from ..registry import CONDITIONAL
from ..spec import SlotSpec, SpecError, one_of
from .base import SlotContext
from .conditional import ConditionalEncoding, check_depth, format_positions, parse_positions

__all__ = ["PegForm", "PEG", "ConditionalPEG"]

PadMode = Literal["zeros", "circular", "replicate", "reflect"]
PAD_MODES: tuple[PadMode, ...] = ("zeros", "circular", "replicate", "reflect")
DEFAULT_PLACEMENT = "0"
_FUNCTION_FLAG = re.compile(r"^(dw|dense)(?:\*(\d+))?$")
_VALID_FLAGS = "dw, dense, dw*N, dense*N (N >= 1), frozen"


def _kernel_size(text: str) -> int:
    k = int(text)
    if k < 1 or k % 2 == 0:
        raise ValueError("k must be a positive odd integer so that the grid keeps its size")
    return k


@dataclass(frozen=True)
class PegForm:
    """The function F of a PEG and how it pads, as read from a ``peg`` slot string."""

    conv: str = "dw"
    """'dw' (depthwise, one filter per channel) or 'dense' (full C -> C convolution)."""
    stacked: int = 0
    """0: one bare convolution; n >= 1: n x (convolution + BatchNorm + ReLU)."""
    kernel: int = 3
    """Odd kernel size k; each convolution pads (k-1)/2 cells per side."""
    pad: PadMode = "zeros"
    """Padding mode, one of :data:`PAD_MODES`."""
    frozen: bool = False
    """Keep the weights (and BatchNorm statistics) at their initial or loaded values."""

    @classmethod
    def from_spec(cls, spec: SlotSpec) -> PegForm:
        """Read flags ``dw``/``dense``/``dw*N``/``dense*N``/``frozen`` and options ``k``, ``pad``."""
        options = spec.typed_options({"k": _kernel_size, "pad": one_of(*PAD_MODES)})
        conv, stacked, frozen, function_flags = "dw", 0, False, []
        for flag in spec.flags:
            match = _FUNCTION_FLAG.match(flag)
            if flag == "frozen":
                frozen = True
            elif match is not None:
                function_flags.append(flag)
                conv = match.group(1)
                stacked = int(match.group(2) or 0)
                if match.group(2) is not None and stacked < 1:
                    raise SpecError(f"'{spec}': {flag!r} stacks no layer; use N >= 1 in '{conv}*N'")
            else:
                raise SpecError(f"'{spec}': unknown flag {flag!r}; valid flags: {_VALID_FLAGS}")
        if len(function_flags) > 1:
            raise SpecError(f"'{spec}': choose one form of F, got {', '.join(function_flags)}")
        return cls(conv, stacked, options.get("k", 3), options.get("pad", "zeros"), frozen)


def _build_function(dim: int, form: PegForm) -> nn.Sequential:
    def conv() -> nn.Conv2d:
        groups = dim if form.conv == "dw" else 1
        return nn.Conv2d(dim, dim, form.kernel, padding=form.kernel // 2, groups=groups, padding_mode=form.pad)

    if form.stacked == 0:
        return nn.Sequential(conv())
    layers: list[nn.Module] = []
    for _ in range(form.stacked):
        layers += [conv(), nn.BatchNorm2d(dim), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class PEG(nn.Module):
    """One position encoding generator: ``x + F(x)`` on the patch grid; prefix tokens untouched.

    In a padded batch (``padding``) F sees each image's valid cells and, beyond them, the padding
    it would see alone: zeros for one zero-padded convolution (the padded tokens are zeroed), each
    image's valid crop run alone for the other forms (its own circular, reflect or replicate
    border; zeros again between stacked layers).
    """

    def __init__(self, dim: int, form: PegForm = PegForm()) -> None:
        super().__init__()
        self.form = form
        self.proj = _build_function(dim, form)
        if form.frozen:
            self.requires_grad_(False)
            self.train(False)

    def train(self, mode: bool = True) -> PEG:
        """Switch mode; a frozen PEG stays in eval mode so BatchNorm statistics stay fixed too."""
        return super().train(mode and not self.form.frozen)

    def forward(
        self, x: torch.Tensor, grid: Grid, num_prefix_tokens: int, padding: Padding | None = None
    ) -> torch.Tensor:  # B, P + H*W, C
        # tokens_to_map / map_to_tokens are views (channels-last strides); prefix tokens get zero
        # rows instead of being split off and concatenated back, so the residual's gradient
        # reaches x as it is
        if padding is None:
            self._check_padding(grid)
            pos = map_to_tokens(self.proj(tokens_to_map(x[:, num_prefix_tokens:], grid)))
        elif self.form.pad == "zeros" and self.form.stacked == 0:
            pos = map_to_tokens(self.proj(tokens_to_map(padding.zero(x[:, num_prefix_tokens:]), grid)))
        else:
            for size in dict.fromkeys(padding.sizes()):
                self._check_padding(size)
            pos = map_to_tokens(padding.crops(tokens_to_map(x[:, num_prefix_tokens:], grid), self.proj))
        return x + (F.pad(pos, (0, 0, num_prefix_tokens, 0)) if num_prefix_tokens else pos)

    def _check_padding(self, grid: Grid) -> None:
        radius, side = self.form.kernel // 2, min(grid)
        too_wide = {"circular": radius > side, "reflect": radius >= side}.get(self.form.pad, False)
        if too_wide:
            raise ValueError(
                f"PEG with k={self.form.kernel} and pad={self.form.pad} needs a grid side of at least "
                f"{radius + (self.form.pad == 'reflect')}, got grid {tuple(grid)}; use a smaller k, "
                "a larger input or pad=zeros/replicate"
            )

    def extra_repr(self) -> str:
        return f"pad={self.form.pad}, frozen={self.form.frozen}"


@CONDITIONAL.register("peg")
class ConditionalPEG(ConditionalEncoding):
    """PEGs at a set of positions, one module each (see the module docstring for the forms).

    Without ``@`` a single PEG goes after block 0, the paper's default.
    """

    def __init__(self, dim: int, positions: tuple[int, ...] = (0,), form: PegForm = PegForm()) -> None:
        super().__init__()
        if not positions:
            raise ValueError("ConditionalPEG needs at least one position")
        self.positions = tuple(sorted(positions))
        self.form = form
        # keys are the positions themselves ("-1", "0", ...), so state-dict names say where a PEG sits
        self.generators = nn.ModuleDict({str(p): PEG(dim, form) for p in self.positions})

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        return {"positions": parse_positions(spec.at or DEFAULT_PLACEMENT), "form": PegForm.from_spec(spec)}

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], **host: Any) -> ConditionalPEG:
        positions = options["positions"]
        check_depth(f"peg@{format_positions(positions)}", positions, ctx.depth)
        return cls(ctx.embed_dim, positions, options["form"])

    def forward(
        self, position: int, x: torch.Tensor, grid: Grid, num_prefix_tokens: int, padding: Padding | None = None
    ) -> torch.Tensor:
        return self.generators[str(position)](x, grid, num_prefix_tokens, padding)

    def extra_repr(self) -> str:
        return f"positions={format_positions(self.positions)}"
