"""The attention layers the quick GPU check runs, and their float64 literal references.

Three layouts: a ViT layer with a class token on the whole grid (``plain``); the same on a padded
batch, whose second image fills only part of the grid (``padded``: its valid tokens must come out
as the image alone would, its padded tokens get no gradient); and Swin's shifted-window attention
(``shifted``), whose reference is full-grid attention where a token sees exactly the tokens of its
window on the grid rolled by half a window that the roll did not bring from the far side.
References use :mod:`tests.encodings.relative.reference` (bucket ids and encodings pair by pair).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tests.encodings.relative.reference import AxisIndex, reference_attention, reference_ids
from vitpos.config.position import SlotContext
from vitpos.models.layers import Attention
from vitpos.models.windows import WindowAttention
from vitpos.padding import Padding
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

PREFIX = 1
"""Class tokens of the plain and padded layouts (DeiT's one)."""
METHODS = ("euclidean", "quant", "cross", "product")
IRPE_FORMS = ("bias:qk", "bias:qk:unshared", "ctx:q", "ctx:k:unshared", "ctx:v", "ctx:qkv:unshared")
"""Per iRPE method: bias and contextual modes, on q, k and v, shared by the heads and not."""


@dataclass(frozen=True)
class CheckShape:
    """The size of the checked layers: a side x side grid, width, heads, batch and Swin's window.

    DeiT-S's width and heads (head width 64). An 8 x 8 grid and a class token make 65 tokens, one
    past a 64-token tile, so the kernels' edge masks run, while the literal references stay quick
    (they build every pair's encoding in Python: Transformer-XL's at 197 tokens takes seconds).
    Swin's 4 x 4 windows on it shift by 2.
    """

    side: int = 8
    dim: int = 384
    heads: int = 6
    batch: int = 2
    window: int = 4

    def __post_init__(self) -> None:
        if self.side <= self.window or self.side % self.window:
            raise ValueError(
                f"the check's grid side ({self.side}) must be a multiple of Swin's window ({self.window}) and larger, "
                "so that every block shifts its windows; change --check-side or --check-window"
            )

    @property
    def grid(self) -> tuple[int, int]:
        return (self.side, self.side)


@dataclass(frozen=True)
class CheckCase:
    """One relative encoding in one layout (``plain``, ``padded`` or ``shifted``)."""

    spec: str
    layout: str = "plain"

    @property
    def label(self) -> str:
        return self.spec if self.layout == "plain" else f"{self.spec} ({self.layout})"


def check_cases() -> list[CheckCase]:
    """Every bucketed relative encoding, Swin's bias under its shift mask, and two on a padded batch."""
    irpe = [CheckCase(f"irpe:{m}:{form}") for m in METHODS for form in IRPE_FORMS]
    classic = [CheckCase(s) for s in ("shaw", "xl", "huang", "sasa")]
    return [
        *irpe,
        *classic,
        CheckCase("swin", "shifted"),
        CheckCase("irpe:product:ctx:qkv", "padded"),
        CheckCase("irpe:product:bias:qk", "padded"),
    ]


def build_layer(case: CheckCase, shape: CheckShape, seed: int = 0) -> Attention:
    """The case's layer in float64 with every relative table random (they start at zero)."""
    torch.manual_seed(seed)
    spec = SlotSpec.parse(case.spec)
    shifted = case.layout == "shifted"
    native = (shape.window, shape.window) if shifted else shape.grid
    ctx = SlotContext(shape.dim, shape.heads, 1, native, 0 if shifted else PREFIX)
    relative = RELATIVE.get(spec.name).from_spec(spec, ctx, layer=0)
    if shifted:
        layer: Attention = WindowAttention(shape.dim, shape.heads, shape.window, shifted=True, relative=relative)
    else:
        layer = Attention(shape.dim, shape.heads, relative=relative)
    layer = layer.double()
    with torch.no_grad():
        for p in relative.parameters():
            p.normal_(std=0.5)
    return layer


def valid_extents(shape: CheckShape) -> torch.Tensor:
    """(B, 2) valid rows and columns of the padded batch: the first image whole, the others smaller."""
    part = (max(1, shape.side - 3), max(1, shape.side - 1))
    return torch.tensor([shape.grid] + [part] * (shape.batch - 1))


def num_tokens(case: CheckCase, shape: CheckShape) -> int:
    return shape.side * shape.side + (0 if case.layout == "shifted" else PREFIX)


def run_layer(layer: Attention, case: CheckCase, shape: CheckShape, x: torch.Tensor) -> torch.Tensor:
    """The layer's output (B, N, C) on ``x`` in the case's layout."""
    if case.layout == "shifted":
        return layer(x, shape.grid, 0)
    padding = Padding(shape.grid, valid_extents(shape).to(x.device)) if case.layout == "padded" else None
    return layer(x, shape.grid, PREFIX, padding=padding)


def token_mask(case: CheckCase, shape: CheckShape) -> torch.Tensor:
    """(B, N, 1) float64: 1 at the tokens whose outputs are compared (all but padded ones)."""
    n = num_tokens(case, shape)
    if case.layout != "padded":
        return torch.ones(shape.batch, n, 1, dtype=torch.float64)
    return (~Padding(shape.grid, valid_extents(shape)).tokens(PREFIX)).double()[..., None]


def reference_output(layer: Attention, case: CheckCase, shape: CheckShape, x: torch.Tensor) -> torch.Tensor:
    """The literal reference of ``layer`` on ``x`` (float64, CPU); zero at padded tokens."""
    if case.layout == "shifted":
        return shifted_window_reference(layer, x, shape.grid, shape.window)
    if case.layout == "plain":
        return reference_attention(layer, case.spec, x, shape.grid, PREFIX, shape.grid)
    out = torch.zeros_like(x)
    mask = token_mask(case, shape)[..., 0].bool()
    for b, (h, w) in enumerate(valid_extents(shape).tolist()):
        tokens = mask[b].nonzero()[:, 0]
        alone = reference_attention(layer, case.spec, x[b : b + 1, tokens], (h, w), PREFIX, shape.grid)
        out = out.index_put((torch.tensor([b]), tokens), alone[0])
    return out


def shifted_window_reference(layer: Attention, x: torch.Tensor, grid: tuple[int, int], window: int) -> torch.Tensor:
    """Swin's shifted-window attention with its relative bias, as full-grid attention with a mask."""
    b, n, c = x.shape
    heads, d = layer.num_heads, layer.head_dim
    q, k, v = layer.qkv(x).reshape(b, n, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
    height, width = grid
    shift = window // 2
    cells = [(r, col) for r in range(height) for col in range(width)]
    allowed = torch.zeros(n, n, dtype=torch.bool)
    for i, (yi, xi) in enumerate(cells):
        for j, (yj, xj) in enumerate(cells):
            ri, ci, rj, cj = (yi - shift) % height, (xi - shift) % width, (yj - shift) % height, (xj - shift) % width
            same_window = ri // window == rj // window and ci // window == cj // window
            unbroken = ri - rj == yi - yj and ci - cj == xi - xj
            allowed[i, j] = same_window and unbroken
    axis = AxisIndex("clip", bound=window - 1)
    (ids,) = reference_ids("product", grid, 0, axis, axis)
    table = layer.relative.table  # Swin's bias: (heads, (2M-1)^2)
    logits = layer.scale * q @ k.transpose(-2, -1) + table[:, ids]
    weights = logits.masked_fill(~allowed, -math.inf).softmax(-1)
    return layer.proj((weights @ v).transpose(1, 2).reshape(b, n, c))
