"""PNG figures for the analyses: grids of heatmaps, curves with error bands and grouped bars.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas directly, so
nothing touches pyplot's global state or needs a display.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import MaxNLocator

from ..files import replacing

__all__ = [
    "save_figure",
    "draw_star",
    "save_heatmaps",
    "save_heatmap_pages",
    "save_curves",
    "save_curve_panels",
    "save_bars",
]

LINE_STYLES = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."))
"""(marker, line style) of the curves of one panel, in turn, so curves that coincide stay distinguishable."""

Array = np.ndarray | torch.Tensor


def _listed_colours(name: str) -> np.ndarray:
    """(N, 3): the colours of matplotlib's listed (qualitative) colour map ``name``."""
    cmap = colormaps[name]
    assert isinstance(cmap, ListedColormap), f"{name} is one of matplotlib's listed colour maps"
    return np.asarray(cmap.colors)


# 60 distinct colours for bucket ids (iRPE's product method alone has 49 buckets)
BUCKET_COLOURS = ListedColormap(
    np.concatenate([_listed_colours(name) for name in ("tab20", "tab20b", "tab20c")]), name="buckets"
)


def _numpy(x: Array) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 110, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG file at ``path`` (its folder created) as every vitpos file is written
    (:func:`vitpos.files.replacing`: whole or not at all, and only where the command may)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return path


def _marker(markers: Sequence, row: int, col: int) -> tuple[int, int] | None:
    """The star of map (row, col): per column, or per map when ``markers`` is nested."""
    if not markers:
        return None
    nested = any(m is not None and isinstance(m[0], (list, tuple)) for m in markers)
    if nested:
        return markers[row][col] if row < len(markers) and col < len(markers[row]) else None
    return markers[col] if col < len(markers) else None


def draw_star(ax, cell: tuple[int, int]) -> None:
    """A reference star on ``cell`` = (row, col): white with a black outline, seen on any colour, drawn
    whole at the border (not clipped to the axes)."""
    (star,) = ax.plot(
        cell[1],
        cell[0],
        marker="*",
        markersize=14,
        markerfacecolor="white",
        markeredgecolor="black",
        markeredgewidth=1.3,
        clip_on=False,
        zorder=5,
    )
    star.set_in_layout(False)  # a star past the border must not resize the panel


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
    xlabel: str = "column",
    ylabel: str = "row",
    colorbar_label: str = "",
    diverging: bool = False,
    panel_titles: Sequence[Sequence[str]] = (),
    extent: tuple[int, int] | None = None,
) -> Path:
    """A grid of heatmaps from ``maps`` of shape (rows, cols, H, W) with one shared colour scale.

    ``diverging``: a signed quantity (a bias, a difference) in a red-blue map centred on 0 (white),
    its scale symmetric around 0. ``panel_titles[r][c]`` titles every panel (instead of
    ``col_labels`` over the top row); NaN panels are left empty. ``extent = (rows, cols)`` labels
    the axes in those units when the maps were pooled from a larger matrix, and draws each map to
    fill a square panel whatever its aspect (attention matrices of 3136 x 49 tokens).

    ``markers[c] = (row, col)`` puts a star on that cell of every map in column ``c`` (the
    reference patch); ``markers[r][c]`` gives one per map instead. ``categorical`` draws integer
    ids (bucket maps) with a qualitative colour map. Every map gets integer ticks; the left
    column and bottom row carry the axis labels ``ylabel`` and ``xlabel``, the colour bar
    ``colorbar_label``. Panels are at most 3 inches wide, whatever the map size, so text stays
    readable; use :func:`save_heatmap_pages` for many rows.
    """
    data = _numpy(maps)
    if data.ndim != 4:
        raise ValueError(f"maps must have shape (rows, cols, H, W), got {data.shape}")
    rows, cols, h, w = data.shape
    colormap: str | ListedColormap = cmap
    if categorical:
        colormap, colours = BUCKET_COLOURS, BUCKET_COLOURS.N
    vmin = float(np.nanmin(data)) if vmin is None else vmin
    vmax = float(np.nanmax(data)) if vmax is None else vmax
    if diverging:
        colormap, bound = "RdBu_r", max(abs(vmin), abs(vmax), 1e-12)
        vmin, vmax = -bound, bound
    size = min(1.8 + 0.06 * max(h, w), 3.0) if extent is None else 2.4
    heading = _wrapped(title, cols * size + 1.2)
    height = rows * size + (0.35 + 0.2 * heading.count("\n") + 0.2 if title else 0.1)
    layout = ConstrainedLayoutEngine(h_pad=0.08 if title else 0.04)  # room between the title and the panel titles
    fig = Figure(figsize=(cols * size + 1.2, height), layout=layout)
    placement: dict = {} if extent is None else dict(extent=(0, extent[1], extent[0], 0), aspect="auto")
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            if categorical:
                image = ax.imshow(
                    data[r, c] % colours, cmap=colormap, vmin=0, vmax=colours - 1, interpolation="nearest"
                )
            else:
                image = ax.imshow(data[r, c], cmap=colormap, vmin=vmin, vmax=vmax, interpolation="nearest", **placement)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            ax.tick_params(labelsize=7, length=2, labelbottom=r == rows - 1, labelleft=c == 0)
            marker = _marker(markers, r, c)
            if marker is not None:
                draw_star(ax, marker)
            if panel_titles:
                ax.set_title(panel_titles[r][c] if c < len(panel_titles[r]) else "", fontsize=8)
                if np.isnan(data[r, c]).all():
                    ax.set_axis_off()
            elif r == 0 and c < len(col_labels):
                ax.set_title(col_labels[c], fontsize=9)
            if c == 0:
                row_label = row_labels[r] if r < len(row_labels) else ""
                ax.set_ylabel("\n".join(t for t in (row_label, ylabel) if t), fontsize=8)
            if r == rows - 1:
                ax.set_xlabel(xlabel, fontsize=8)
    if not categorical and image is not None:
        bar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=min(0.8, 0.4 + 0.2 * rows), aspect=25)
        bar.ax.tick_params(labelsize=7)
        if colorbar_label:
            bar.set_label(colorbar_label, fontsize=8)
    if title:
        fig.suptitle(heading, fontsize=10)
    return save_figure(fig, path)


def _wrapped(title: str, width_in: float) -> str:
    """A figure title broken into lines that fit a figure ``width_in`` inches wide."""
    return "\n".join(textwrap.wrap(title, width=max(40, int(width_in * 13))))


def save_heatmap_pages(
    path: str | Path,
    maps: Array,
    *,
    rows_per_page: int = 4,
    row_labels: Sequence[str] = (),
    markers: Sequence = (),
    panel_titles: Sequence[Sequence[str]] = (),
    **options,
) -> list[Path]:
    """:func:`save_heatmaps` split into files of at most ``rows_per_page`` rows, so each stays readable.

    One page keeps ``path``; more are named ``<stem>_rows<first>-<last><suffix>``. ``options``
    go to :func:`save_heatmaps`; per-row ``markers`` (nested) are split with the rows.
    """
    path = Path(path)
    rows = len(maps)
    nested = any(m is not None and isinstance(m[0], (list, tuple)) for m in markers) if markers else False
    pages = []
    for start in range(0, rows, rows_per_page):
        stop = min(start + rows_per_page, rows)
        name = path if rows <= rows_per_page else path.with_name(f"{path.stem}_rows{start}-{stop - 1}{path.suffix}")
        pages.append(
            save_heatmaps(
                name,
                maps[start:stop],
                row_labels=list(row_labels)[start:stop],
                markers=list(markers)[start:stop] if nested else markers,
                panel_titles=list(panel_titles)[start:stop],
                **options,
            )
        )
    return pages


def save_bars(
    path: str | Path,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    ylim: tuple[float, float] | None = None,
    lines: Mapping[str, float] | None = None,
) -> Path:
    """Grouped bars: one group per entry of ``groups``, one bar per ``series`` (name -> one value per group).

    ``lines`` draws labelled horizontal reference lines (name -> y, e.g. chance). The legend sits
    below the axes and long group names are slanted, so neither covers a bar. A value below
    ``ylim`` is written at the foot of its cut-off bar.
    """
    names = list(series)
    width = 0.8 / max(len(names), 1)
    fig = Figure(figsize=(max(4.5, 1.5 + 0.22 * len(groups) * len(names)), 3.6), layout="constrained")
    ax = fig.subplots()
    xs = np.arange(len(groups))
    for k, name in enumerate(names):
        values = np.asarray(series[name], dtype=float)
        if len(values) != len(groups):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(groups)} groups")
        where = xs + (k - (len(names) - 1) / 2) * width
        ax.bar(where, values, width, label=name)
        for x_k, value in zip(where, values, strict=True):
            if ylim is not None and value < ylim[0]:  # a bar cut off by the axis: its value at the bottom
                ax.annotate(f"{value:.2g}", (x_k, ylim[0]), xytext=(0, 3), textcoords="offset points", fontsize=6,
                            ha="center", rotation=90)  # fmt: skip
    for (name, y), style in zip((lines or {}).items(), ("--", ":", "-."), strict=False):
        ax.axhline(y, color="black", linestyle=style, linewidth=1, label=name)
    slanted = len(groups) > 3 or max((len(g) for g in groups), default=0) > 12
    ax.set_xticks(xs, list(groups), rotation=35 if slanted else 0, ha="right" if slanted else "center", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()  # below the axes, in columns: the bars keep the width
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncol=min(3, len(labels)), frameon=False)
    return save_figure(fig, path)


def save_curves(
    path: str | Path,
    x: Sequence[float],
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    xticklabels: Sequence[str] | None = None,
    ylim: tuple[float, float] | None = None,
    floor: float | None = None,
) -> Path:
    """Lines of mean values with ± std bands, one per entry of ``series`` (name -> (means, stds)).

    NaN means (a value that does not apply) leave a gap in the line. ``xticklabels`` names
    each x value (a tick per point) instead of numbering the axis. ``ylim`` fixes the y axis
    (e.g. (0, 100) for accuracy in %) and clips the bands to it; the legend sits outside the axes,
    so it never covers data. ``floor``: values below it (an R² of -4.7 beside scores in [0, 1]) are
    drawn at the floor as a downward triangle labelled with their value, so one outlier does not
    flatten the others.
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
        bottom = -np.inf if floor is None else floor
        clipped = m < bottom
        shown = np.where(clipped, bottom, m)
        (line,) = ax.plot(xs, shown, marker="o", markersize=3, label=name)
        low, high = (shown - s, shown + s) if ylim is None else (np.clip(m - s, *ylim), np.clip(m + s, *ylim))
        low, high = np.maximum(low, bottom), np.maximum(high, bottom)
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
        for x_k, value in zip(xs[clipped], m[clipped], strict=True):
            ax.plot(x_k, bottom, marker="v", markersize=7, color=line.get_color())
            ax.annotate(
                f"{value:.2g}", (x_k, bottom), textcoords="offset points", xytext=(0, 6), fontsize=7, ha="center"
            )
    if logx and plotted and (xs > 0).all():  # a log axis needs at least one positive point to show
        ax.set_xscale("log")
    if xticklabels is not None:
        ax.set_xticks(xs, list(xticklabels), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if ylim is not None:
        ax.set_ylim(*ylim)
    elif floor is not None and plotted:
        ax.set_ylim(bottom=floor - 0.05 * (ax.get_ylim()[1] - floor))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return save_figure(fig, path)


def save_curve_panels(
    path: str | Path,
    x: Sequence[float],
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    xticklabels: Sequence[str] | None = None,
    panel_ylabels: Mapping[str, str] | None = None,
    from_zero: bool = False,
) -> Path:
    """One panel per entry of ``panels`` (title -> {curve name -> values}), side by side; each panel
    draws its curves with their own marker and line style (:data:`LINE_STYLES`), so curves that
    coincide stay visible. NaN values leave gaps; a panel whose values are all NaN says so.
    ``ylabel`` labels the first panel's axis, ``panel_ylabels[title]`` another panel's (a quantity of
    its own); ``from_zero`` starts every y axis at 0 (errors, changes)."""
    fig = Figure(figsize=(2.6 * len(panels) + 1.6, 3.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    xs = np.asarray(x, dtype=float)
    for ax, (name, curves) in zip(axes, panels.items(), strict=True):
        drawn = False
        for k, (label, values) in enumerate(curves.items()):
            ys = np.asarray(values, dtype=float)
            if len(ys) != len(xs):
                raise ValueError(f"curve {label!r} of panel {name!r} has {len(ys)} values for {len(xs)} x values")
            marker, style = LINE_STYLES[k % len(LINE_STYLES)]
            size = 7 - 1.5 * (k % len(LINE_STYLES))  # the first curve's larger markers show behind later ones
            ax.plot(xs, ys, marker=marker, linestyle=style, markersize=size, fillstyle="none", label=label)
            drawn = drawn or bool(np.isfinite(ys).any())
        if not drawn:
            ax.text(0.5, 0.5, "does not apply", transform=ax.transAxes, ha="center", fontsize=8)
        if xticklabels is not None:
            ax.set_xticks(xs, list(xticklabels), fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(alpha=0.3)
        if from_zero and drawn:
            ax.set_ylim(bottom=0)
        if panel_ylabels and name in panel_ylabels:
            ax.set_ylabel(panel_ylabels[name], fontsize=8)
    axes[0].set_ylabel(ylabel, fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside right upper")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
