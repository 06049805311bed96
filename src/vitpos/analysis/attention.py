"""Attention maps per stage, block and head (CPVT Fig. 5) and how local they are.

The weights are read from the attention layer of every block of every stage
(``stages[s].blocks[i].attn``): for the duration of the call each layer is asked for them
(``return_weights=True``, which the attention kernel computes on its explicit path) and hands
them to a forward hook. They are laid out on the stage's token grid as one dense
(B, heads, queries, keys) matrix per layer, whatever the host's attention:

* global attention (ViT, PVT without reduction): queries and keys are the stage's tokens;
* PVT's spatial-reduction attention: the keys are the prefix tokens and the grid reduced by the
  layer's ``sr_ratio`` (a key cell covers r x r query cells; distances use its centre);
* Swin's window attention: each window's weights are put at its tokens' places (undoing the
  shift and dropping padding); a query gives no weight to tokens outside its window.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ..grid import Grid, grid_coords
from ..models.layers import Attention
from ..models.windows import WindowAttention, partition_windows
from .stages import stage_blocks, stage_count

__all__ = [
    "AttentionMap",
    "captured_calls",
    "dense_image",
    "key_grid_of",
    "key_stride_of",
    "explicit_attention",
    "attention_maps",
    "patch_attention",
    "query_maps",
    "mean_attention_distance",
    "uniform_attention_distance",
]


@dataclass(frozen=True)
class AttentionMap:
    """The softmax weights of one attention layer, on its stage's grid."""

    stage: int
    block: int
    weights: torch.Tensor
    """(B, heads, P + H*W, P + h*w): queries (prefix first, then the grid row-major) by keys."""
    grid: Grid
    """The queries' grid (H, W): the stage's."""
    key_stride: int
    """Query cells per key cell along each axis: 1, or PVT's spatial-reduction ratio."""
    num_prefix_tokens: int

    @property
    def key_grid(self) -> Grid:
        """The keys' grid (h, w): the stage's, or its spatially reduced grid (PVT)."""
        return key_grid_of(self.grid, self.key_stride)


@dataclass
class CapturedCall:
    """What one attention layer saw and returned in one forward."""

    layer: Attention
    grid: Grid
    num_prefix_tokens: int
    weights: torch.Tensor


@contextmanager
def captured_calls(layers: list[Attention]) -> Iterator[list[CapturedCall]]:
    """Within the block, every forward of ``layers`` appends its input grid and weights."""
    calls: list[CapturedCall] = []
    pending: dict[int, tuple[Grid, int]] = {}

    def ask(module, args, kwargs):
        grid = args[1] if len(args) > 1 else kwargs["grid"]
        prefix = args[2] if len(args) > 2 else kwargs["num_prefix_tokens"]
        pending[id(module)] = (tuple(grid), int(prefix))
        return args, {**kwargs, "return_weights": True}

    def keep(module, _args, _kwargs, output):
        out, weights = output
        calls.append(CapturedCall(module, *pending.pop(id(module)), weights.detach()))
        return out

    handles = [layer.register_forward_pre_hook(ask, with_kwargs=True) for layer in layers]
    handles += [layer.register_forward_hook(keep, with_kwargs=True) for layer in layers]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def explicit_attention(model: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward appends each attention layer's weights as the layer
    returns them: (B, heads, N, M), or per window (B * windows, heads, n, n) for window attention."""
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no vitpos Attention layers to read weights from")
    weights: list[torch.Tensor] = []
    with captured_calls(layers) as calls:
        yield weights
        weights.extend(call.weights for call in calls)


def _window_tokens(layer: WindowAttention, grid: Grid) -> torch.Tensor:
    """(windows, n): the token each slot of each window holds on ``grid``; H*W for padding."""
    h, w = grid
    ids = torch.arange(1, h * w + 1, dtype=torch.float64).reshape(1, h * w, 1)
    slots = partition_windows(ids, layer.layout(grid))[..., 0].long() - 1  # padding: -1
    return torch.where(slots < 0, h * w, slots)


def key_grid_of(grid: Grid, key_stride: int = 1) -> Grid:
    """The grid of keys reduced by ``key_stride`` (the remainder is cut off, as in PVT)."""
    return (grid[0] // key_stride, grid[1] // key_stride)


def key_stride_of(layer: Attention) -> int:
    """Query cells per key cell along each axis: PVT's spatial-reduction ratio, else 1."""
    return 1 if isinstance(layer, WindowAttention) else getattr(layer, "sr_ratio", 1)


def dense_image(call: CapturedCall, batch: int, index: int) -> torch.Tensor:
    """Image ``index``'s weights of one call as (heads, queries, keys) on the grid (windows put in place)."""
    weights, (h, w) = call.weights, call.grid
    if not isinstance(call.layer, WindowAttention):
        return weights[index]
    tokens = _window_tokens(call.layer, call.grid).to(weights.device)  # windows, n
    windows, n = tokens.shape
    own = weights.reshape(batch, windows, weights.shape[1], n, n)[index].transpose(0, 1)  # heads, windows, n, n
    dense = weights.new_zeros(weights.shape[1], h * w + 1, h * w + 1)
    dense[:, tokens[:, :, None], tokens[:, None, :]] = own
    return dense[..., : h * w, : h * w]


def _dense(call: CapturedCall, batch: int) -> tuple[torch.Tensor, int]:
    """The call's weights as (B, heads, queries, keys) on the grid, and the key stride."""
    if isinstance(call.layer, WindowAttention):
        return torch.stack([dense_image(call, batch, i) for i in range(batch)]), 1
    return call.weights, key_stride_of(call.layer)


@torch.no_grad()
def attention_maps(model: nn.Module, images: torch.Tensor) -> list[AttentionMap]:
    """Softmax attention weights of every block of every stage, in forward order.

    Rows of real queries sum to one. The model is put in eval mode (no attention dropout) and
    restored afterwards. Every layer's dense matrix for every image is held at once: for large
    grids (a 56x56 first stage) use :func:`~.attention_summary.attention_summaries`, which streams.
    """
    blocks = {(s, i): block for s in range(stage_count(model)) for i, block in enumerate(stage_blocks(model, s))}
    owners = {id(block.attn): where for where, block in blocks.items()}
    layers = [block.attn for block in blocks.values()]
    was_training = model.training
    model.eval()
    try:
        with captured_calls(layers) as calls:
            model(images)
    finally:
        model.train(was_training)
    out = []
    for call in calls:
        weights, key_stride = _dense(call, images.shape[0])
        out.append(AttentionMap(*owners[id(call.layer)], weights, call.grid, key_stride, call.num_prefix_tokens))
    return out


def patch_attention(weights: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """The patch-to-patch block of (…, N, M) weights, renormalised so each query row sums to one."""
    block = weights[..., num_prefix_tokens:, num_prefix_tokens:]
    return block / block.sum(dim=-1, keepdim=True).clamp_min(1e-12)


def query_maps(
    weights: torch.Tensor, grid: Grid, queries: list[tuple[int, int]], num_prefix_tokens: int, key_stride: int = 1
) -> torch.Tensor:
    """(…, Q, h, w): where each query cell (row, col) of ``grid`` attends, on the keys' grid (patch keys only)."""
    h, w = grid
    kh, kw = key_grid_of(grid, key_stride)
    patches = patch_attention(weights, num_prefix_tokens)
    if patches.shape[-2] != h * w or patches.shape[-1] != kh * kw:
        raise ValueError(
            f"{patches.shape[-2]} x {patches.shape[-1]} patch weights do not fit {h}x{w} queries and {kh}x{kw} keys"
        )
    rows = torch.tensor([r * w + c for r, c in queries], dtype=torch.long)
    return patches[..., rows, :].reshape(*patches.shape[:-2], len(queries), kh, kw)


@functools.lru_cache(maxsize=2)  # a layer after layer of one stage asks for the same (H*W)^2 table
def _cell_distances(grid: Grid, key_stride: int = 1, device=None) -> torch.Tensor:
    """(H*W, h*w) distances, in query cells, from each query cell to the centre of each key cell
    (a key cell covers ``key_stride`` x ``key_stride`` query cells)."""
    queries = grid_coords(grid, dtype=torch.float64, device=device)
    keys = (
        grid_coords(key_grid_of(grid, key_stride), dtype=torch.float64, device=device) * key_stride
        + (key_stride - 1) / 2
    )
    return torch.cdist(queries, keys)


def uniform_attention_distance(grid: Grid, key_stride: int = 1) -> float:
    """The mean attention distance of uniform attention: the mean distance from a query cell to a key cell."""
    return float(_cell_distances(tuple(grid), key_stride).mean())


def mean_attention_distance(
    weights: torch.Tensor, grid: Grid, num_prefix_tokens: int, key_stride: int = 1
) -> torch.Tensor:
    """(heads,): the expected distance in cells from a query to the keys it attends.

    Computed on the patch-to-patch weights of (…, heads, N, M), averaged over queries and
    every leading dimension (images). Uniform attention gives :func:`uniform_attention_distance`;
    smaller is more local.
    """
    distance = _cell_distances(tuple(grid), key_stride, weights.device)
    patches = patch_attention(weights.double(), num_prefix_tokens)
    per_query = (patches * distance).sum(dim=-1).mean(dim=-1)  # …, heads
    return per_query.reshape(-1, per_query.shape[-1]).mean(dim=0).float()
