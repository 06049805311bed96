"""Translation equivariance (CPVT §3 and appendix A; thesis ch. 4).

Shift the input by whole patches and compare the features of the shifted input with the
shifted features of the original: an equivariant model gives the same tokens, moved. The error
is measured on interior cells, away from the grid border and from content that entered or left
the image; for a GAP model the logits should not change at all.

Two shifts: ``roll`` (cyclic, nothing enters or leaves: a model with circular padding and no
absolute table is exactly equivariant) and ``zero`` (the image moves and the vacated strip is
filled with zeros, as when an object moves on a black background).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..errors import ConfigError
from ..grid import Grid, tokens_to_map

__all__ = ["MODES", "DIRECTIONS", "translate", "interior_mask", "EquivarianceResult", "equivariance_error", "equivariance_sweep"]

MODES = ("roll", "zero")
DIRECTIONS = {"down": (1, 0), "right": (0, 1), "diagonal": (1, 1)}
"""The unit shifts (rows, columns) that :func:`equivariance_sweep` scales."""


def translate(x: torch.Tensor, shift: tuple[int, int], mode: str = "roll") -> torch.Tensor:
    """Move the last two dims of ``x`` down by ``shift[0]`` and right by ``shift[1]`` elements."""
    if mode not in MODES:
        raise ValueError(f"unknown shift mode {mode!r}; valid values: {', '.join(MODES)}")
    dy, dx = shift
    if mode == "roll":
        return x.roll((dy, dx), dims=(-2, -1))
    h, w = x.shape[-2:]
    out = torch.zeros_like(x)
    if abs(dy) >= h or abs(dx) >= w:
        return out
    src_y, dst_y = slice(max(-dy, 0), h - max(dy, 0)), slice(max(dy, 0), h - max(-dy, 0))
    src_x, dst_x = slice(max(-dx, 0), w - max(dx, 0)), slice(max(dx, 0), w - max(-dx, 0))
    out[..., dst_y, dst_x] = x[..., src_y, src_x]
    return out


def interior_mask(grid: Grid, shift: tuple[int, int], margin: int = 1, mode: str = "roll") -> torch.Tensor:
    """(H, W) bool: cells t whose source t - shift (cyclic for ``roll``; inside the grid for
    ``zero``) and t itself are both at least ``margin`` cells from every edge."""
    h, w = grid
    rows = torch.arange(h)[:, None]
    cols = torch.arange(w)[None, :]

    def inside(r: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (r >= margin) & (r < h - margin) & (c >= margin) & (c < w - margin)

    src_rows, src_cols = rows - shift[0], cols - shift[1]
    if mode == "roll":
        src_rows, src_cols = src_rows % h, src_cols % w
    return inside(rows, cols) & inside(src_rows, src_cols)


@dataclass(frozen=True)
class EquivarianceResult:
    """How far a model is from translation equivariance for one shift."""

    feature_error: float
    """||f(Tx) - T f(x)|| / ||T f(x)|| over interior patch tokens; 0 for an equivariant model."""
    logit_change: float | None
    """||g(Tx) - g(x)|| / ||g(x)|| of the head's output; 0 for a translation-invariant model.
    None for a model without a head."""
    interior_cells: int
    """Number of cells the feature error is measured on."""

    def to_dict(self) -> dict[str, float | int | None]:
        """Plain dict, for JSON."""
        return asdict(self)


def _patch_maps(model: nn.Module, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised patch tokens as a (B, D, H, W) map, and the pooled head output."""
    features = model.forward_features(images)
    grid = model.grid_for(tuple(images.shape[-2:]))
    maps = tokens_to_map(features[:, model.num_prefix_tokens :], grid)
    return maps, model.forward_head(features)


@torch.no_grad()
def equivariance_error(
    model: nn.Module, images: torch.Tensor, shift: tuple[int, int] = (1, 1), *, mode: str = "roll", margin: int = 1
) -> EquivarianceResult:
    """Shift ``images`` by ``shift`` = (rows, columns) patches and compare features and logits.

    ``margin`` cells at the border are excluded from the feature error (zero padding and the
    class token let them know where they are); use 0 to include every cell that has a source.
    """
    if images.shape[-2] % model.cfg.patch_size or images.shape[-1] % model.cfg.patch_size:
        raise ValueError("equivariance needs image sizes that are whole multiples of the patch size")
    grid = model.grid_for(tuple(images.shape[-2:]))
    if not (abs(shift[0]) < grid[0] and abs(shift[1]) < grid[1]):
        raise ConfigError(
            f"shift {tuple(shift)} leaves the {grid[0]}x{grid[1]} grid: shift by fewer patches than the grid has "
            f"(|rows| < {grid[0]}, |cols| < {grid[1]})"
        )
    was_training = model.training
    model.eval()
    try:
        patch = model.cfg.patch_size
        maps, logits = _patch_maps(model, images)
        shifted_maps, shifted_logits = _patch_maps(model, translate(images, (shift[0] * patch, shift[1] * patch), mode))
    finally:
        model.train(was_training)
    expected = translate(maps, shift, mode)
    mask = interior_mask(tuple(maps.shape[-2:]), shift, margin, mode)
    if not mask.any():
        raise ConfigError(
            f"no interior cells left for shift {shift} and margin {margin} on grid {tuple(maps.shape[-2:])}; "
            "use a smaller shift or margin"
        )
    diff = (shifted_maps - expected)[..., mask]
    feature_error = float(diff.norm() / expected[..., mask].norm().clamp_min(1e-12))
    logit_change = None
    if model.num_classes:
        logit_change = float((shifted_logits - logits).norm() / logits.norm().clamp_min(1e-12))
    return EquivarianceResult(feature_error, logit_change, int(mask.sum()))


def equivariance_sweep(
    model: nn.Module, images: torch.Tensor, max_shift: int, *, mode: str = "roll", margin: int = 1
) -> dict[str, list[EquivarianceResult | None]]:
    """:func:`equivariance_error` for shifts of 1..``max_shift`` patches in each of :data:`DIRECTIONS`;
    None where a shift leaves no interior cell (``zero`` mode, large shifts)."""
    out: dict[str, list[EquivarianceResult | None]] = {}
    for name, (dy, dx) in DIRECTIONS.items():
        out[name] = []
        for k in range(1, max_shift + 1):
            try:
                out[name].append(equivariance_error(model, images, (k * dy, k * dx), mode=mode, margin=margin))
            except ConfigError:  # shifted off the grid or no interior cell left
                out[name].append(None)
    return out
