"""Building blocks of the plain ViT host: patch embedding, attention, MLP, block."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import attention
from ..encodings.relative.base import RelativePosition
from ..errors import VitposError
from ..grid import Grid, patch_grid, tracing
from ..padding import Padding

__all__ = [
    "ImageStem",
    "check_images",
    "PatchEmbed",
    "Partition",
    "Attention",
    "Mlp",
    "DropPath",
    "LayerScale",
    "Block",
    "init_linear",
    "MAX_LOGIT_SCALE",
]

MAX_LOGIT_SCALE = math.log(1.0 / 0.01)
"""Cosine attention's learned log logit scale is clamped here: a scale of at most 100 (Swin V2)."""


def init_linear(layer: nn.Linear) -> nn.Linear:
    """ViT initialisation: trunc-normal weights (std 0.02), zero bias."""
    nn.init.trunc_normal_(layer.weight, std=0.02)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


@runtime_checkable
class ImageStem(Protocol):
    """What a host's first downsampling step offers: a check of the images it is given."""

    def check_input(self, x: torch.Tensor) -> None:
        """Raise :class:`VitposError` for inputs the stem cannot take, saying how to convert them."""
        ...


class PatchEmbed(nn.Module):
    """Non-overlapping k x k patches -> tokens; returns (B, H*W, D) and the grid (H, W)."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int, pad: bool = False) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.in_chans = in_chans
        self.pad = pad
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        self.check_input(x)
        h, w = x.shape[-2:]
        patch_grid((h, w), self.patch_size, pad=self.pad)  # raises for sizes it cannot cut
        p = self.patch_size
        if self.pad and (h % p or w % p):
            x = F.pad(x, (0, (-w) % p, 0, (-h) % p))
        x = self.proj(x)  # B, D, H, W
        # the grid is read from the map, so that symbolic sizes (tracing) are the tensor's own
        return x.flatten(2).transpose(1, 2), (x.shape[-2], x.shape[-1])

    def check_input(self, x: torch.Tensor) -> None:
        """Raise :class:`VitposError` for inputs the model cannot take, saying how to convert them."""
        check_images(x, self.in_chans, self.proj.weight, 1 if self.pad else self.patch_size, "patch")


def check_images(x: torch.Tensor, in_chans: int, stem_weight: torch.Tensor, min_side: int, unit: str) -> None:
    """Raise :class:`VitposError` unless ``x`` is a non-empty float batch (B, in_chans, H, W) on the device
    and in the dtype of ``stem_weight``, with sides of at least ``min_side`` pixels (one ``unit``)."""
    if not isinstance(x, torch.Tensor):
        raise VitposError(
            f"the model takes a torch.Tensor of images (B, {in_chans}, H, W), got {type(x).__name__}; "
            "convert with torch.as_tensor(x, dtype=torch.float32)"
        )
    if x.ndim != 4 or x.shape[1] != in_chans:
        raise VitposError(f"expected images of shape (B, {in_chans}, H, W), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise VitposError(
            f"expected floating-point images, got {x.dtype}; convert with x.float() "
            "(and scale 0-255 pixels to the range the model was trained on)"
        )
    if x.shape[0] == 0:
        raise VitposError(f"the batch is empty: images of shape {tuple(x.shape)}; pass at least one image")
    if x.device != stem_weight.device:
        raise VitposError(
            f"the images are on device {x.device} but the model is on {stem_weight.device}; "
            f"move them with x.to({str(stem_weight.device)!r})"
        )
    weight = stem_weight.dtype
    if x.dtype != weight and not torch.is_autocast_enabled(x.device.type):
        raise VitposError(
            f"the images are {x.dtype} but the model's weights are {weight}; convert with "
            f"x.to({weight}) or run under torch.autocast"
        )
    if min(x.shape[-2:]) < min_side:
        raise VitposError(
            f"the images are {x.shape[-2]}x{x.shape[-1]} pixels, smaller than one "
            f"{min_side}-pixel {unit}; resize them to a multiple of {min_side}"
        )
    if min(x.shape[-2:]) == 0:
        raise VitposError(
            f"the images are {x.shape[-2]}x{x.shape[-1]} pixels: empty; pass images of at least one {unit}"
        )


@dataclass(frozen=True)
class Partition:
    """The token groups one attention call attends within, and what merges the result back."""

    tokens: torch.Tensor
    """(B', N', C): every group's tokens (the whole sequence for global attention)."""
    grid: Grid
    """The grid of one group (relative encodings see it)."""
    num_prefix_tokens: int
    mask: torch.Tensor | None
    """An additive logit mask broadcastable to (B', heads, N', N'), or None."""
    qk_pos: torch.Tensor | None
    """Added to the query and key inputs only, cut like the tokens, or None."""
    layout: Any = None
    """What the attention variant's :meth:`Attention.merge` needs (Swin: the window layout)."""
    key_padding: torch.Tensor | None = None
    """(B', M) bool, True at keys that are padding of a padded batch, or None."""
    padding: Padding | None = None
    """The padding of ``grid`` where the groups are the whole images (relative terms read it), or None."""


class Attention(nn.Module):
    """Multi-head self-attention with an optional relative encoding.

    The encoding declares its terms for the grid (:meth:`RelativePosition.relative_terms`) and
    :func:`vitpos.attention.attention` computes attention with them, choosing the path for the
    device and call (:mod:`vitpos.attention.policy`). :attr:`path` names a path instead (tests,
    benchmarks); ``return_weights=True`` also returns the softmax weights (B, heads, N, M).

    Variants override hooks, not :meth:`forward`: :meth:`key_value_source` and
    :meth:`key_padding` (where keys and values come from, and which of them are padding: PVT's
    spatial reduction) and :meth:`partition` / :meth:`merge` (which tokens attend together:
    Swin's windows). ``padding`` (:class:`~vitpos.padding.Padding` of ``grid``) marks the padded
    tokens of a padded batch: no query attends to them.

    ``cosine``: Swin V2's cosine attention (Liu et al., CVPR 2022, Eq. 2): the logits are the cosine
    similarity of q and k times a learned per-head scale ``exp(min(logit_scale, log 100))``
    (``logit_scale`` starts at log 10) instead of q . k / sqrt(d). It is computed by the same kernel,
    with unit keys and unit queries times the scale; relative terms that meet the queries (a key
    table) meet these, and RoPE turns them (a rotation keeps their length).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        relative: RelativePosition | None = None,
        cosine: bool = False,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.path: str | None = None
        """One of :data:`vitpos.attention.PATHS` to use instead of the policy's choice, or None."""
        self.qkv = init_linear(nn.Linear(dim, dim * 3, bias=qkv_bias))
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = init_linear(nn.Linear(dim, dim))
        self.proj_drop = nn.Dropout(proj_drop)
        self.relative = relative
        self.logit_scale = nn.Parameter(torch.full((num_heads, 1, 1), math.log(10.0))) if cosine else None

    def forward(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
        qk_pos: torch.Tensor | None = None,
        padding: Padding | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``qk_pos`` (broadcastable to x) is added to the query and key inputs only: q, k from
        ``x + qk_pos``, v from ``x`` (DETR's encoder)."""
        part = self.partition(x, grid, num_prefix_tokens, mask, qk_pos, padding)
        q, k, v = self.project_qkv(part)
        result = self.attend(
            q, k, v, part.grid, part.num_prefix_tokens, part.mask, return_weights, part.key_padding, part.padding
        )
        out, weights = result if isinstance(result, tuple) else (result, None)
        out = self.merge(self.project(out), part)
        return out if weights is None else (out, weights)

    def partition(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        mask: torch.Tensor | None,
        qk_pos: torch.Tensor | None,
        padding: Padding | None = None,
    ) -> Partition:
        """The groups of tokens that attend among themselves: here one, the whole sequence."""
        keys = None if padding is None else self.key_padding(padding, num_prefix_tokens)
        return Partition(x, grid, num_prefix_tokens, mask, qk_pos, key_padding=keys, padding=padding)

    def merge(self, out: torch.Tensor, part: Partition) -> torch.Tensor:  # B, N, C
        """The inverse of :meth:`partition` on the projected outputs."""
        return out

    def key_value_source(self, x: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor | None:
        """The tokens keys and values are projected from; None: the query tokens ``x`` themselves."""
        return None

    def key_padding(self, padding: Padding, num_prefix_tokens: int) -> torch.Tensor:
        """(B, M) bool: which keys of :meth:`key_value_source` are padding (here the tokens' own)."""
        return padding.tokens(num_prefix_tokens)

    def project_qkv(self, part: Partition) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (B, heads, N, d) from the tokens, k and v (B, heads, M, d) from :meth:`key_value_source`;
        ``qk_pos`` reaches the queries and keys, not the values."""
        x, qk_pos = part.tokens, part.qk_pos
        b, n, c = x.shape
        weight, bias = self.qkv.weight, self.projection_bias()
        source = self.key_value_source(x, part.grid, part.num_prefix_tokens)
        if source is None:  # one projection; W_qk (x + pos) + b = W_qk x + b + W_qk pos
            qkv = F.linear(x, weight, bias)
            if qk_pos is not None:
                qkv = qkv + F.pad(F.linear(qk_pos, weight[: 2 * c]), (0, c))
            q, k, v = qkv.reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            return q, k, v
        qk_in = x if qk_pos is None else x + qk_pos
        q = F.linear(qk_in, weight[:c], None if bias is None else bias[:c])
        kv = F.linear(source, weight[c:], None if bias is None else bias[c:])
        if qk_pos is not None:
            keys_from = self.key_value_source(qk_in, part.grid, part.num_prefix_tokens)
            assert keys_from is not None  # the same hook as for the values
            keys = F.linear(keys_from, weight[c : 2 * c], None if bias is None else bias[c : 2 * c])
            kv = torch.cat([keys, kv[..., c:]], dim=-1)
        q = q.reshape(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = kv.reshape(b, -1, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    def projection_bias(self) -> torch.Tensor | None:
        """The bias (3C,) of the query, key and value projections, or None."""
        return self.qkv.bias

    def query_key(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """q and k as the kernel multiplies them, and the scale of their product: as they are with
        1/sqrt(d), or (cosine) unit vectors, the queries times the per-head logit scale, with 1."""
        if self.logit_scale is None:
            return q, k, self.scale
        scale = self.logit_scale.clamp(max=MAX_LOGIT_SCALE).exp()
        return (F.normalize(q, dim=-1) * scale).to(q.dtype), F.normalize(k, dim=-1), 1.0

    def project(self, out: torch.Tensor) -> torch.Tensor:  # B, N, C
        """The heads' outputs (B, heads, N, d) merged and projected."""
        b, _, n, _ = out.shape
        out = out.transpose(1, 2)
        if tracing():
            # a copy: otherwise a graph records the merge as a view where the traced kernel's output
            # allowed one, which a runtime's own kernel (ONNX's attention) need not
            out = out.clone(memory_format=torch.contiguous_format)
        return self.proj_drop(self.proj(out.reshape(b, n, -1)))

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
        key_padding: torch.Tensor | None = None,
        padding: Padding | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # B, heads, N, head_dim
        """Attention of q over (k, v) with the relative terms; ``mask`` is an additive logit term
        broadcastable to (B, heads, N, M) (e.g. Swin's shifted-window mask), ``key_padding`` (B, M)
        marks padded keys; ``padding`` (of ``grid``) gives the relative encoding each image's extent."""
        terms = None
        if self.relative is not None and padding is None:
            terms = self.relative.relative_terms(grid, num_prefix_tokens, q.device)
        elif self.relative is not None and padding is not None:
            terms, per_image = self.relative.padded_terms(grid, num_prefix_tokens, padding, q.device)
            if per_image is not None:
                mask = per_image if mask is None else mask + per_image
        q, k, scale = self.query_key(q, k)
        return attention(
            q, k, v, terms, scale=scale, mask=mask, key_padding=key_padding,
            dropout_p=self.attn_drop.p if self.training else 0.0, return_weights=return_weights, path=self.path,
        )  # fmt: skip


class Mlp(nn.Module):
    """Linear -> GELU -> Linear."""

    def __init__(self, dim: int, hidden: int, drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = init_linear(nn.Linear(dim, hidden))
        self.act = nn.GELU()
        self.fc2 = init_linear(nn.Linear(hidden, dim))
        self.drop = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch per sample with probability ``p``."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerScale(nn.Module):
    """A learned per-channel factor on a residual branch (CaiT, DeiT III), starting at ``init``."""

    def __init__(self, dim: int, init: float) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class Block(nn.Module):
    """Pre-norm transformer block; ``pos`` (if given) is added to the normalised attention input,
    ``qk_pos`` to its query and key inputs only; ``padding`` marks a padded batch's padded tokens.
    ``layer_scale`` (an initial value) scales each branch by a learned per-channel factor before its
    residual (``ls1``, ``ls2``: DeiT III's ``gamma_1``, ``gamma_2``); None leaves them unscaled.

    The one block forward of every host: a host's block changes where the second norm
    sits (:attr:`norm_on_residual`) or what the feed-forward branch is (:meth:`feed_forward`).
    """

    norm_on_residual = False
    """False: ``x + mlp(norm2(x))`` after attention (pre-norm); True: the second norm on the residual
    stream itself, ``x = norm2(x)``, then ``x + mlp(x)`` (the Compact Transformers' layer)."""
    post_norm = False
    """True: each branch's output is normalised before the residual, ``x + norm1(attn(x))`` and
    ``x + norm2(mlp(x))`` (Swin V2's residual post-norm); ``pos`` is then added to the attention input."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        drop: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
        relative: RelativePosition | None = None,
        attn: Attention | None = None,
        norm_eps: float = 1e-6,
        layer_scale: float | None = None,
    ) -> None:
        super().__init__()
        if attn is not None and relative is not None:
            raise ValueError("pass the relative encoding to the attention module given as attn, not to Block")
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        # attn: a ready attention (a subclass such as windowed or spatial-reduction attention)
        self.attn = attn if attn is not None else Attention(dim, num_heads, qkv_bias, attn_drop, drop, relative)
        self.ls1: nn.Module = nn.Identity() if layer_scale is None else LayerScale(dim, layer_scale)
        self.drop_path1 = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp: nn.Module = Mlp(dim, int(dim * mlp_ratio), drop)
        self.ls2: nn.Module = nn.Identity() if layer_scale is None else LayerScale(dim, layer_scale)
        self.drop_path2 = DropPath(drop_path)

    def forward(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        pos: torch.Tensor | None = None,
        qk_pos: torch.Tensor | None = None,
        padding: Padding | None = None,
    ) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attend(x, grid, num_prefix_tokens, pos, qk_pos, padding)))
        if self.post_norm:
            return x + self.drop_path2(self.norm2(self.feed_forward(x, grid, num_prefix_tokens)))
        if self.norm_on_residual:
            x = h = self.norm2(x)
        else:
            h = self.norm2(x)
        return x + self.drop_path2(self.ls2(self.feed_forward(h, grid, num_prefix_tokens)))

    def feed_forward(self, h: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:
        """The feed-forward branch of the normalised tokens ``h``, before the residual: the MLP."""
        return self.mlp(h)

    def attend(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        pos: torch.Tensor | None,
        qk_pos: torch.Tensor | None,
        padding: Padding | None = None,
    ) -> torch.Tensor:
        """The attention branch: attention of the normalised tokens (plus ``pos``), before the residual
        (post-norm: the attention of the tokens, normalised)."""
        h = x if self.post_norm else self.norm1(x)
        if pos is not None:
            h = h + pos
        if qk_pos is None and padding is None:
            out = self.attn(h, grid, num_prefix_tokens)
        else:
            out = self.attn(h, grid, num_prefix_tokens, qk_pos=qk_pos, padding=padding)
        return self.norm1(out) if self.post_norm else out
