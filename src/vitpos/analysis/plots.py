"""PNG figures for the analyses: grids of heatmaps and curves with error bands.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas directly, so
nothing touches pyplot's global state or needs a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

__all__ = ["save_heatmaps", "save_curves"]

Array = np.ndarray | torch.Tensor

# 60 distinct colours for bucket ids (iRPE's product method alone has 49 buckets)
BUCKET_COLOURS = ListedColormap([c for name in ("tab20", "tab20b", "tab20c") for c in colormaps[name].colors], name="buckets")


def _numpy(x: Array) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110, bbox_inches="tight")
    return path


def _marker(markers: Sequence, row: int, col: int) -> tuple[int, int] | None:
    """The star of map (row, col): per column, or per map when ``markers`` is nested."""
    if not markers:
        return None
    nested = any(m is not None and isinstance(m[0], (list, tuple)) for m in markers)
    if nested:
        return markers[row][col] if row < len(markers) and col < len(markers[row]) else None
    return markers[col] if col < len(markers) else None


def save_heatmaps(
    path: str | Path,
    maps: Array,
    *,
    row_labels: Sequence[str] = (),
    col_labels: Sequence[str] = (),
    title: str = "",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    markers: Sequence = (),
    categorical: bool = False,
) -> Path:
    """A grid of heatmaps from ``maps`` of shape (rows, cols, H, W) with one shared colour scale.

    ``markers[c] = (row, col)`` puts a star on that cell of every map in column ``c`` (the
    reference patch); ``markers[r][c]`` gives one per map instead. ``categorical`` draws integer
    ids (bucket maps) with a qualitative colour map.
    """
    data = _numpy(maps)
    if data.ndim != 4:
        raise ValueError(f"maps must have shape (rows, cols, H, W), got {data.shape}")
    rows, cols, h, w = data.shape
    if categorical:
        cmap, colours = BUCKET_COLOURS, BUCKET_COLOURS.N
    vmin = float(np.nanmin(data)) if vmin is None else vmin
    vmax = float(np.nanmax(data)) if vmax is None else vmax
    size = 1.6 + 0.08 * max(h, w)
    fig = Figure(figsize=(cols * size + 0.8, rows * size + (0.4 if title else 0)), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            if categorical:
                image = ax.imshow(data[r, c] % colours, cmap=cmap, vmin=0, vmax=colours - 1, interpolation="nearest")
            else:
                image = ax.imshow(data[r, c], cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            marker = _marker(markers, r, c)
            if marker is not None:
                ax.plot(marker[1], marker[0], marker="*", color="red", markersize=9, markeredgecolor="white")
            if r == 0 and c < len(col_labels):
                ax.set_title(col_labels[c], fontsize=8)
            if c == 0 and r < len(row_labels):
                ax.set_ylabel(row_labels[r], fontsize=8)
    if not categorical and image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def save_curves(
    path: str | Path,
    x: Sequence[float],
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    ylim: tuple[float, float] | None = None,
) -> Path:
    """Lines of mean values with ± std bands, one per entry of ``series`` (name -> (means, stds)).

    NaN means (a value that does not apply) leave a gap in the line. ``ylim`` fixes the y axis
    (e.g. (0, 100) for accuracy in %) and clips the bands to it; the legend sits outside the axes,
    so it never covers data.
    """
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    xs = np.asarray(x, dtype=float)
    plotted = False
    for name, (means, stds) in series.items():
        m, s = np.asarray(means, dtype=float), np.asarray(stds, dtype=float)
        plotted = plotted or bool(np.isfinite(m).any())
        if len(m) != len(xs) or len(s) != len(xs):
            raise ValueError(f"series {name!r} has {len(m)} means and {len(s)} stds for {len(xs)} x values")
        (line,) = ax.plot(xs, m, marker="o", markersize=3, label=name)
        low, high = (m - s, m + s) if ylim is None else (np.clip(m - s, *ylim), np.clip(m + s, *ylim))
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    if logx and plotted and (xs > 0).all():  # a log axis needs at least one positive point to show
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _save(fig, path)
