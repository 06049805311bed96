"""Padded batches: which cells of a token grid are padding, per image, at every stage.

A padded batch carries DETR's pixel mask ``padding_mask`` (B, H_img, W_img), True where a pixel
is padding; each image sits at the top left and is padded at the bottom and right to the batch's
size, a multiple of the model's stride. :class:`Padding` holds each image's valid extent on one
token grid, ``(h_i, w_i)`` cells, and derives the next grid's from it: a token is padding if its
whole patch is padding, so a stage that downsamples by ``f`` keeps ``ceil(h_i / f)`` rows (exact
when the batch is padded to a multiple of the stride: every patch of the padded batch is a patch
of the image alone, or all padding).

Everything that would read padding as content asks this object: attention masks padded keys
(:meth:`Padding.tokens`), per-image encodings are computed at each image's own valid grid and
placed at its top left (:meth:`Padding.place`), a convolution sees zeros beyond the valid cells
(:meth:`Padding.zero`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .errors import VitposError
from .grid import Grid, map_to_tokens, tokens_to_map

__all__ = ["Padding"]


@dataclass(frozen=True, eq=False)
class Padding:
    """Each image's valid top-left extent on one (H, W) token grid."""

    grid: Grid
    """The padded grid (H, W) every image of the batch is laid out on."""
    valid: torch.Tensor
    """(B, 2) long: each image's valid rows and columns (h_i, w_i), 1 <= h_i <= H, 1 <= w_i <= W."""

    @classmethod
    def from_mask(cls, padding_mask: torch.Tensor, batch: int | None = None) -> Padding:
        """From DETR's mask (B, H, W), True where a cell is padding: each image's valid region must be
        one top-left rectangle (images padded at the bottom and right), as DETR's collate makes it."""
        if not isinstance(padding_mask, torch.Tensor) or padding_mask.dtype != torch.bool or padding_mask.ndim != 3:
            got = (
                f"{padding_mask.dtype} of shape {tuple(padding_mask.shape)}"
                if isinstance(padding_mask, torch.Tensor)
                else type(padding_mask).__name__
            )
            raise VitposError(f"padding_mask must be a bool tensor (B, H, W), True where a pixel is padding; got {got}")
        if batch is not None and padding_mask.shape[0] != batch:
            raise VitposError(
                f"padding_mask has {padding_mask.shape[0]} images, the batch {batch}; pass one mask per image"
            )
        _, h, w = padding_mask.shape
        content = ~padding_mask
        valid = torch.stack([content.any(2).sum(1), content.any(1).sum(1)], dim=1)
        padding = cls((h, w), valid)
        if not torch.compiler.is_compiling():
            if bool((valid == 0).any()):
                raise VitposError("padding_mask marks every pixel of an image as padding; each image needs content")
            if not torch.equal(padding.mask, padding_mask):
                raise VitposError(
                    "padding_mask must mark each image's content as one top-left rectangle (images padded at the "
                    "bottom and right, as DETR's collate pads them); got another pattern"
                )
        return padding

    @property
    def batch(self) -> int:
        return self.valid.shape[0]

    def or_none(self) -> Padding | None:
        """None where no cell is padding (outside tracing): the batch then runs as one without a mask."""
        if torch.compiler.is_compiling():
            return self
        return None if bool((self.valid == torch.tensor(self.grid, device=self.valid.device)).all()) else self

    @property
    def mask(self) -> torch.Tensor:
        """(B, H, W) bool, True where a cell is padding."""
        h, w = self.grid
        rows = torch.arange(h, device=self.valid.device)[None, :, None] >= self.valid[:, 0, None, None]
        cols = torch.arange(w, device=self.valid.device)[None, None, :] >= self.valid[:, 1, None, None]
        return rows | cols

    def tokens(self, num_prefix_tokens: int = 0) -> torch.Tensor:
        """(B, P + H*W) bool, True at padded tokens; prefix tokens are never padding."""
        cells = self.mask.flatten(1)
        return F.pad(cells, (num_prefix_tokens, 0), value=False) if num_prefix_tokens else cells

    def reduce(self, factor: tuple[int, int]) -> Padding:
        """The padding of the grid downsampled by ``factor`` (rows, columns), floor-sized as a strided
        convolution cuts it: a cell is padding if every cell it covers is."""
        (h, w), (fh, fw) = self.grid, factor
        valid = (self.valid + torch.tensor([fh - 1, fw - 1], device=self.valid.device)) // torch.tensor(
            [fh, fw], device=self.valid.device
        )
        new = (h // fh, w // fw)
        return Padding(new, torch.minimum(valid, torch.tensor(new, device=self.valid.device)))

    def at(self, grid: Grid) -> Padding:
        """The padding of ``grid``, a grid this one's sides are multiples of (a later stage's)."""
        (h, w), (gh, gw) = self.grid, grid
        if (h, w) == (gh, gw):
            return self
        if h % gh or w % gw:
            raise VitposError(
                f"a padded batch on a {h}x{w} grid does not downsample evenly to {gh}x{gw}; pad the images to a "
                "multiple of the model's stride"
            )
        return self.reduce((h // gh, w // gw))

    def sizes(self) -> list[Grid]:
        """Each image's valid grid (h_i, w_i) as Python integers."""
        return [(int(h), int(w)) for h, w in self.valid.tolist()]

    def zero(self, x: torch.Tensor, num_prefix_tokens: int = 0) -> torch.Tensor:
        """Tokens (B, P + H*W, C) with the padded ones set to zero."""
        return x.masked_fill(self.tokens(num_prefix_tokens)[..., None], 0)

    def place(self, make: Callable[[Grid], torch.Tensor], num_prefix_tokens: int = 0) -> torch.Tensor:
        """(B, P + H*W, D): ``make(g)`` (1, P + h*w, D), computed once per distinct valid grid ``g``, put at
        each image's prefix and top-left cells; padded cells are zero."""
        h, w = self.grid
        p = num_prefix_tokens
        made: dict[Grid, torch.Tensor] = {}
        rows = []
        for size in self.sizes():
            if size not in made:
                table = make(size)
                cells = tokens_to_map(table[:, p:], size)
                cells = F.pad(cells, (0, w - size[1], 0, h - size[0]))
                made[size] = torch.cat([table[:, :p], map_to_tokens(cells)], dim=1)
            rows.append(made[size])
        return torch.cat(rows)

    def place_pairs(self, make: Callable[[Grid], torch.Tensor], num_prefix_tokens: int = 0) -> torch.Tensor:
        """(B, C, N, N) with N = P + H*W: ``make(g)`` (C, P + h*w, P + h*w), a term of every (query, key)
        pair on each image's valid grid ``g``, put at the pairs of its prefix and valid cells; other pairs 0."""
        (h, w), p = self.grid, num_prefix_tokens
        made: dict[Grid, torch.Tensor] = {}
        rows = []
        for size in self.sizes():
            if size not in made:
                pairs = make(size)
                cells = torch.arange(h * w, device=pairs.device).view(h, w)[: size[0], : size[1]].flatten() + p
                index = torch.cat([torch.arange(p, device=pairs.device), cells])
                n = p + h * w
                columns = pairs.new_zeros(pairs.shape[0], index.shape[0], n).index_copy(2, index, pairs)
                made[size] = pairs.new_zeros(pairs.shape[0], n, n).index_copy(1, index, columns)
            rows.append(made[size])
        return torch.stack(rows)

    def crops(self, x: torch.Tensor, apply: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``apply`` run on each image's valid crop of the map ``x`` (B, C, H, W) alone (images of one valid
        size together), its result put back at the top left; padded cells are zero."""
        out = torch.zeros_like(x)
        sizes = self.sizes()
        for size in dict.fromkeys(sizes):
            index = torch.tensor([i for i, s in enumerate(sizes) if s == size], device=x.device)
            out[index, :, : size[0], : size[1]] = apply(x[index, :, : size[0], : size[1]])
        return out
