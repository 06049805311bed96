"""Attention maps per block and head (CPVT Fig. 5) and how local they are.

The weights are read from every :class:`vitpos.models.layers.Attention` in the model: for the
duration of the call each layer is asked for them (``return_weights=True``, which the attention
kernel computes on its explicit path) and hands them to a forward hook. Any host built from
that module works (Swin's window attention gives them per window).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ..grid import Grid, grid_coords
from ..models.layers import Attention

__all__ = ["explicit_attention", "attention_maps", "patch_attention", "query_maps", "mean_attention_distance", "uniform_attention_distance"]


@contextmanager
def explicit_attention(model: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward appends each attention layer's weights (B, heads, N, N)."""
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no vitpos Attention layers to read weights from")
    captured: list[torch.Tensor] = []

    def ask(_module, args, kwargs):
        return args, {**kwargs, "return_weights": True}

    def keep(_module, _args, _kwargs, output):
        out, weights = output
        captured.append(weights.detach())
        return out

    handles = [layer.register_forward_pre_hook(ask, with_kwargs=True) for layer in layers]
    handles += [layer.register_forward_hook(keep, with_kwargs=True) for layer in layers]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def attention_maps(model: nn.Module, images: torch.Tensor) -> list[torch.Tensor]:
    """Softmax attention weights of every attention layer, in forward order: each (B, heads, N, N).

    Rows sum to one. N counts prefix tokens first, then the grid cells in row-major order.
    The model is put in eval mode (no attention dropout) and restored afterwards.
    """
    was_training = model.training
    model.eval()
    try:
        with explicit_attention(model) as captured:
            model(images)
    finally:
        model.train(was_training)
    return list(captured)


def patch_attention(weights: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """The patch-to-patch block of (…, N, N) weights, renormalised so each query row sums to one."""
    block = weights[..., num_prefix_tokens:, num_prefix_tokens:]
    return block / block.sum(dim=-1, keepdim=True).clamp_min(1e-12)


def query_maps(weights: torch.Tensor, grid: Grid, queries: list[tuple[int, int]], num_prefix_tokens: int) -> torch.Tensor:
    """(…, Q, H, W): where each query cell (row, col) attends, on the grid (patch keys only)."""
    h, w = grid
    patches = patch_attention(weights, num_prefix_tokens)
    if patches.shape[-1] != h * w:
        raise ValueError(f"{patches.shape[-1]} patch tokens do not fill the {h}x{w} grid")
    rows = torch.tensor([r * w + c for r, c in queries], dtype=torch.long)
    return patches[..., rows, :].reshape(*patches.shape[:-2], len(queries), h, w)


def _cell_distances(grid: Grid, device=None) -> torch.Tensor:
    coords = grid_coords(grid, dtype=torch.float64, device=device)
    return torch.cdist(coords, coords)  # N, N


def uniform_attention_distance(grid: Grid) -> float:
    """The mean attention distance of uniform attention: the mean distance between two cells."""
    return float(_cell_distances(grid).mean())


def mean_attention_distance(weights: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:
    """(heads,): the expected distance in patches from a query to the keys it attends.

    Computed on the patch-to-patch weights of (B, heads, N, N), averaged over queries and the
    batch. Uniform attention gives :func:`uniform_attention_distance`; smaller is more local.
    """
    distance = _cell_distances(grid, weights.device)
    patches = patch_attention(weights.double(), num_prefix_tokens)
    per_query = (patches * distance).sum(dim=-1)  # B, heads, N
    return per_query.mean(dim=(0, -1)).float()
