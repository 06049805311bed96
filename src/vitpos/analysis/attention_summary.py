"""Attention per stage, block and head in bounded memory: what ``vitpos attention`` shows, streamed.

:func:`~.attention.attention_maps` holds every layer's dense (B, heads, N, M) weights at once,
which on a 56x56 grid is gigabytes. :func:`attention_summaries` runs the images a few at a time
and reduces each layer's weights as soon as a forward returns them, one image's dense matrix at a
time: the mean attention distance per head, where chosen query cells attend (mean over heads and
images) and the first image's patch-to-patch matrix, averaged over blocks of tokens to at most
:data:`MATRIX_SIDE` a side. Peak memory is then one image's dense matrix of one layer plus the
sums, whatever the number of images, blocks and stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..grid import Grid
from ..progress import progress
from .attention import (
    captured_calls,
    dense_image,
    key_stride_of,
    mean_attention_distance,
    patch_attention,
    query_maps,
)
from .stages import stage_blocks

__all__ = ["MATRIX_SIDE", "IMAGES_PER_PASS", "AttentionSummary", "attention_summaries", "pooled_matrix"]

MATRIX_SIDE = 256
"""The most rows and columns of an attention matrix kept for a figure (a figure has fewer pixels)."""
IMAGES_PER_PASS = 4
"""Images per forward pass."""


@dataclass(frozen=True)
class AttentionSummary:
    """One attention layer, reduced over the images."""

    stage: int
    block: int
    grid: Grid
    """The queries' grid (the stage's)."""
    key_stride: int
    """Query cells per key cell along each axis: 1, or PVT's spatial-reduction ratio."""
    num_prefix_tokens: int
    distance: torch.Tensor
    """(heads,): the mean attention distance in cells, over queries and images."""
    queries: torch.Tensor
    """(Q, h, w): where each query cell attends on the keys' grid, mean over heads and images."""
    matrix: torch.Tensor
    """(heads, n, m): the first image's patch-to-patch weights, averaged over blocks of tokens."""
    matrix_tokens: tuple[int, int]
    """The (query, key) patch tokens ``matrix`` covers; more than its sides when it was pooled."""


def pooled_matrix(weights: torch.Tensor, side: int = MATRIX_SIDE) -> torch.Tensor:
    """(…, N, M) -> (…, min(N, side), min(M, side)): the mean over (near-)equal blocks of rows and columns."""
    n, m = weights.shape[-2:]
    if n <= side and m <= side:
        return weights
    flat = weights.reshape(-1, 1, n, m)
    pooled = F.adaptive_avg_pool2d(flat, (min(n, side), min(m, side)))
    return pooled.reshape(*weights.shape[:-2], *pooled.shape[-2:])


@torch.no_grad()
def attention_summaries(
    model: nn.Module,
    images: torch.Tensor,
    stages: list[int],
    queries: Callable[[Grid], list[tuple[int, int]]],
    *,
    images_per_pass: int = IMAGES_PER_PASS,
) -> list[AttentionSummary]:
    """:class:`AttentionSummary` of every block of ``stages``, in order; ``queries(grid)`` picks the
    query cells of a stage. The model is put in eval mode and restored afterwards."""
    owners = {(s, i): block.attn for s in stages for i, block in enumerate(stage_blocks(model, s))}
    blocks = {id(layer): where for where, layer in owners.items()}
    layers = list(owners.values())
    sums: dict[tuple[int, int], dict] = {}
    was_training = model.training
    model.eval()
    try:
        starts = range(0, images.shape[0], images_per_pass)
        for start in progress(starts, "attention maps", unit="pass"):
            chunk = images[start : start + images_per_pass]
            with captured_calls(layers) as calls:
                model(chunk)
            for call in calls:
                for index in range(chunk.shape[0]):
                    _add(sums, blocks[id(call.layer)], call, dense_image(call, chunk.shape[0], index))
    finally:
        model.train(was_training)
    out = []
    for (stage, block), acc in sorted(sums.items()):
        grid, prefix, stride, count = acc["grid"], acc["prefix"], acc["stride"], acc["count"]
        attended = query_maps(acc["rows"] / count, grid, queries(grid), prefix, stride).float()
        distance = (acc["distance"] / count).float()
        out.append(AttentionSummary(stage, block, grid, stride, prefix, distance, attended, *acc["matrix"]))
    return out


def _add(sums: dict, where: tuple[int, int], call, weights: torch.Tensor) -> None:
    """Add one image's dense (heads, N, M) weights of one layer to its sums."""
    grid, prefix, stride = call.grid, call.num_prefix_tokens, key_stride_of(call.layer)
    distance = torch.cat(
        [mean_attention_distance(weights[h : h + 1], grid, prefix, stride).double() for h in range(weights.shape[0])]
    )
    rows = weights.mean(dim=0).double()
    acc = sums.get(where)
    if acc is None:
        patches = patch_attention(weights, prefix)
        matrix = (pooled_matrix(patches).float(), (patches.shape[-2], patches.shape[-1]))
        sums[where] = dict(
            grid=grid, prefix=prefix, stride=stride, count=1, distance=distance, rows=rows, matrix=matrix
        )
        return
    acc["count"] += 1
    acc["distance"] += distance
    acc["rows"] += rows
