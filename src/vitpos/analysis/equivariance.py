"""Translation equivariance (CPVT §3 and appendix A; thesis ch. 4).

Shift the input by whole last-stage tokens (patches of a plain ViT; ``cfg.stride`` pixels of a
pyramid, which moves every stage's map by whole cells) and compare the features of the shifted
input with the shifted features of the original: an equivariant model gives the same tokens,
moved. The error is measured on interior cells, away from the grid border and from content
that entered or left the image, for the last stage and for every stage of a pyramid; for a GAP
model the logits should not change at all.

Two shifts: ``roll`` (cyclic, nothing enters or leaves: a model with circular padding and no
absolute table is exactly equivariant) and ``zero`` (the image moves and the vacated strip is
filled with zeros, as when an object moves on a black background).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..grid import Grid, tokens_to_map
from ..progress import progress
from .stages import as_host, stage_count, stage_grid

__all__ = [
    "MODES",
    "DIRECTIONS",
    "translate",
    "interior_mask",
    "EquivarianceResult",
    "equivariance_error",
    "equivariance_sweep",
]

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
    """||f(Tx) - T f(x)|| / ||T f(x)|| over interior patch tokens of the last stage; 0 for an equivariant model."""
    logit_change: float | None
    """||g(Tx) - g(x)|| / ||g(x)|| of the classifier's logits; 0 for a translation-invariant model.
    None for a model without a classifier (a segmenter's host) or whose head is not one vector per
    image (a detector's set of boxes, which should move with the image rather than stay)."""
    interior_cells: int
    """Number of last-stage cells the feature error is measured on."""
    stage_errors: tuple[float, ...] = ()
    """The feature error of every stage's map, first to last (the last is ``feature_error``);
    stage s sees the same image shift as ``stride / stride_s`` times more cells, and its margin
    grows by the same factor."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for JSON."""
        return {**asdict(self), "stage_errors": list(self.stage_errors)}


def _stage_maps(model: nn.Module, images: torch.Tensor) -> tuple[list[torch.Tensor], Any]:
    """Every stage's feature map (B, C_s, H_s, W_s), the last one of normalised patch tokens, and the head output."""
    host = as_host(model)
    tokens = host.forward_tokens(images)
    last = tokens_to_map(tokens[:, host.num_prefix_tokens :], stage_grid(model, (images.shape[-2], images.shape[-1])))
    earlier = host.forward_features(images)[:-1] if stage_count(model) > 1 else []
    return [*earlier, last], host.forward_head(tokens)


def _relative_error(
    shifted: torch.Tensor, original: torch.Tensor, shift: tuple[int, int], mode: str, margin: int
) -> tuple[float, int]:
    """The feature error of one stage's maps, and the number of interior cells it is measured on."""
    expected = translate(original, shift, mode)
    mask = interior_mask((original.shape[-2], original.shape[-1]), shift, margin, mode)
    if not mask.any():
        raise ConfigError(
            f"no interior cells left for shift {shift} and margin {margin} on grid {tuple(original.shape[-2:])}; "
            "use a smaller shift or margin"
        )
    diff = (shifted - expected)[..., mask]
    return float(diff.norm() / expected[..., mask].norm().clamp_min(1e-12)), int(mask.sum())


@torch.no_grad()
def equivariance_error(
    model: nn.Module, images: torch.Tensor, shift: tuple[int, int] = (1, 1), *, mode: str = "roll", margin: int = 1
) -> EquivarianceResult:
    """Shift ``images`` by ``shift`` = (rows, columns) last-stage tokens and compare features and logits.

    One token of the last stage is ``model.cfg.stride`` pixels (the patch size of a plain ViT).
    ``margin`` cells at the border are excluded from the feature error (zero padding and the
    class token let them know where they are); use 0 to include every cell that has a source.
    """
    host = as_host(model)
    stride = host.cfg.stride
    if images.shape[-2] % stride or images.shape[-1] % stride:
        raise ValueError(
            f"equivariance needs image sizes that are whole multiples of the last stage's stride ({stride} pixels), "
            f"got {images.shape[-2]}x{images.shape[-1]}"
        )
    grids = host.stage_grids((images.shape[-2], images.shape[-1]))
    grid = grids[-1]
    if not (abs(shift[0]) < grid[0] and abs(shift[1]) < grid[1]):
        raise ConfigError(
            f"shift {tuple(shift)} leaves the {grid[0]}x{grid[1]} grid: shift by fewer patches (last-stage tokens) "
            f"than the grid has "
            f"(|rows| < {grid[0]}, |cols| < {grid[1]})"
        )
    was_training = model.training
    model.eval()
    try:
        maps, logits = _stage_maps(model, images)
        shifted_maps, shifted_logits = _stage_maps(
            model, translate(images, (shift[0] * stride, shift[1] * stride), mode)
        )
    finally:
        model.train(was_training)
    errors = []
    for grid_s, original, shifted in zip(grids, maps, shifted_maps, strict=True):
        factor = (grid_s[0] // grid[0], grid_s[1] // grid[1])
        stage_shift = (shift[0] * factor[0], shift[1] * factor[1])
        errors.append(_relative_error(shifted, original, stage_shift, mode, margin * max(factor)))
    logit_change = None
    if host.num_classes and isinstance(logits, torch.Tensor):
        logit_change = float((shifted_logits - logits).norm() / logits.norm().clamp_min(1e-12))
    feature_error, interior_cells = errors[-1]
    return EquivarianceResult(feature_error, logit_change, interior_cells, tuple(e for e, _ in errors))


def equivariance_sweep(
    model: nn.Module, images: torch.Tensor, max_shift: int, *, mode: str = "roll", margin: int = 1
) -> dict[str, list[EquivarianceResult | None]]:
    """:func:`equivariance_error` for shifts of 1..``max_shift`` patches in each of :data:`DIRECTIONS`;
    None where a shift leaves no interior cell (``zero`` mode, large shifts)."""
    out: dict[str, list[EquivarianceResult | None]] = {name: [] for name in DIRECTIONS}
    shifts = [(name, k) for name in DIRECTIONS for k in range(1, max_shift + 1)]
    for name, k in progress(shifts, "equivariance sweep", unit="shift"):
        dy, dx = DIRECTIONS[name]
        try:
            out[name].append(equivariance_error(model, images, (k * dy, k * dx), mode=mode, margin=margin))
        except ConfigError:  # shifted off the grid or no interior cell left
            out[name].append(None)
    return out
