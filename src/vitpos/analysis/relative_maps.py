"""Maps of relative encodings around reference patches (iRPE Fig. 5 and supplement Fig. 6-9).

* :func:`bucket_maps` — which bucket each key cell falls in, seen from a reference query cell,
  for each iRPE mapping method (cells of one colour share one encoding).
* :func:`relative_logit_bias` — the extra logits b_ij a block's relative encoding adds to
  attention. A content-independent bias (:class:`RelativeBias`) needs no input; any other
  relative encoding (iRPE contextual modes, Shaw, ...) is evaluated on the queries and keys of
  an input, captured at the attention layer, and averaged over the batch.
* :func:`bias_maps` — those logits around reference query cells, laid out on the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..encodings.relative.base import RelativeBias
from ..encodings.relative.buckets import relative_buckets
from ..errors import ConfigError
from ..grid import Grid
from ..models.layers import Attention
from ..models.windows import WindowAttention
from .stages import as_host, host_stage, stage_blocks, stage_count, stage_grid

__all__ = [
    "bucket_maps",
    "reference_lattice",
    "RelativeLayer",
    "relative_attention_layers",
    "relative_logit_bias",
    "bias_maps",
]


def reference_lattice(grid: Grid, per_side: int = 5) -> list[tuple[int, int]]:
    """``per_side`` x ``per_side`` cells spread evenly over the grid (iRPE Fig. 5 uses 5x5 of 14x14)."""
    if per_side < 1:
        raise ConfigError(f"per_side = {per_side}: need at least 1 reference cell per side")
    h, w = grid
    rows = torch.linspace(0, h - 1, min(per_side, h)).round().long().unique().tolist()
    cols = torch.linspace(0, w - 1, min(per_side, w)).round().long().unique().tolist()
    return [(r, c) for r in rows for c in cols]


def bucket_maps(method: str, grid: Grid, references: list[tuple[int, int]], **options) -> tuple[torch.Tensor, int]:
    """(R, H, W) bucket ids of every key cell for each reference query cell, and the bucket count.

    ``cross`` gives (2, R, H, W): the row-offset buckets, then the column-offset buckets.
    ``options`` go to :func:`vitpos.relative_buckets` (``ratio``, ``index``, ``quant``).
    """
    h, w = grid
    ids, count = relative_buckets(method, grid, **options)
    rows = torch.tensor([r * w + c for r, c in references], dtype=torch.long)
    return ids[..., rows, :].reshape(*ids.shape[:-2], len(references), h, w), count


@dataclass(frozen=True)
class RelativeLayer:
    """An attention layer that carries a relative encoding, and where it sits in the host."""

    stage: int
    block: int
    attn: Attention

    @property
    def windowed(self) -> bool:
        """True when the layer attends within windows (Swin): its encoding sees one window."""
        return isinstance(self.attn, WindowAttention)

    def view(self, model: nn.Module, image_hw: tuple[int, int]) -> tuple[Grid, int]:
        """The grid and prefix-token count the encoding sees for images of ``image_hw``: the
        stage's, or one window of it (Swin)."""
        grid = stage_grid(model, image_hw, self.stage)
        if isinstance(self.attn, WindowAttention):
            return self.attn.layout(grid).window, 0
        return grid, host_stage(model, self.stage).num_prefix_tokens


class NoRelativeEncodingError(ValueError):
    """The model has no attention layer with a relative encoding."""


def relative_attention_layers(model: nn.Module) -> list[RelativeLayer]:
    """The blocks of ``model`` whose attention carries a relative encoding, stage by stage; raises if none."""
    layers = [
        RelativeLayer(s, i, block.attn)
        for s in range(stage_count(model))
        for i, block in enumerate(stage_blocks(model, s))
        if block.attn.relative is not None
    ]
    if not layers:
        raise NoRelativeEncodingError(
            f"this model has no relative encoding (relative={as_host(model).cfg.position.relative!r}); "
            "build it with a relative slot, e.g. vitpos.create_model(name, relative='irpe:product:ctx:k')"
        )
    return layers


def _layer(model: nn.Module, block: int) -> RelativeLayer:
    layers = relative_attention_layers(model)
    if not -len(layers) <= block < len(layers):
        raise ValueError(f"block {block} does not exist; the model has {len(layers)} layers with a relative encoding")
    return layers[block]


@torch.no_grad()
def relative_logit_bias(model: nn.Module, block: int = 0, images: torch.Tensor | None = None) -> torch.Tensor:
    """(heads or 1, N, N): the logits that layer ``block`` (counted over the layers with a relative
    encoding, stage by stage) adds, in logit units, on the grid it sees (:meth:`RelativeLayer.view`).

    ``images`` are needed unless the encoding is a pure position bias; for content-dependent
    encodings the result is the mean over the batch (and over the windows of window attention).
    """
    layer = _layer(model, block)
    attn, rel = layer.attn, layer.attn.relative
    assert rel is not None, "relative_attention_layers keeps the layers that carry a relative encoding"
    if isinstance(rel, RelativeBias):
        image_hw = as_host(model).cfg.image_hw if images is None else (images.shape[-2], images.shape[-1])
        grid, prefix = layer.view(model, image_hw)
        return rel.position_bias(grid, prefix).float()
    if images is None:
        raise ValueError(f"{type(rel).__name__} depends on the queries and keys; pass images to evaluate it on")
    captured: list[tuple] = []
    handle = attn.register_forward_pre_hook(lambda _m, args: captured.append(args))
    was_training = model.training
    model.eval()
    try:
        model(images)
    finally:
        handle.remove()
        model.train(was_training)
    x, grid, num_prefix_tokens = captured[0][:3]
    # the groups the layer attends within (Swin: its windows) and its projections, as its forward makes them
    part = attn.partition(x, tuple(grid), num_prefix_tokens, None, None)
    q, k, _ = attn.project_qkv(part)
    rows, cols = part.grid
    terms = rel.relative_terms((rows, cols), part.num_prefix_tokens, q.device)
    if terms.rotation is not None:
        q, k = terms.rotation.apply(q, k)
    bias = terms.logits(q, k, attn.scale)
    if terms.query_shift is not None:  # (q_i + u) . k_j: u . k_j is part of the encoding's logits
        shift = (k @ (terms.query_shift * attn.scale)).unsqueeze(-2)
        bias = shift if bias is None else bias + shift
    if bias is None:
        raise ValueError(f"{type(rel).__name__} adds no logit term (it acts through rotation or values only)")
    return bias.float().mean(dim=0) if bias.ndim == 4 else bias.float()  # mean over the batch


def bias_maps(
    bias: torch.Tensor, grid: Grid, references: list[tuple[int, int]], num_prefix_tokens: int
) -> torch.Tensor:
    """(heads, R, H, W): the logit bias from each reference query cell to every key cell."""
    h, w = grid
    patches = bias[..., num_prefix_tokens:, num_prefix_tokens:]
    if patches.shape[-1] != h * w:
        raise ValueError(f"a bias over {patches.shape[-1]} patch tokens does not fit the {h}x{w} grid")
    rows = torch.tensor([r * w + c for r, c in references], dtype=torch.long)
    return patches[..., rows, :].reshape(patches.shape[0], len(references), h, w)
