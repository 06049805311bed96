"""Figures: reference stars seen on any colour and whole at the border; a pyramid's equivariance
curves in one panel per stage."""

import json

import numpy as np
import pytest
from PIL import Image

from vitpos.analysis.plots import save_curve_panels, save_heatmaps
from vitpos.cli import main

from ..commands.test_analysis_commands import PYRAMID_ARGS
from .test_plots import assert_png


def _star_pixels(tmp_path, value: float, cell: tuple[int, int], side: int = 5) -> np.ndarray:
    """How far (in grey levels) the star at ``cell`` moves each pixel it changes, on a ``side`` x ``side``
    map filled with ``value`` (scale -1..1)."""
    maps = np.full((1, 1, side, side), value)
    maps[0, 0, side // 2, side // 2] = -value if value else 1.0  # a second value fixes the colour scale
    images = []
    for markers in ((), [cell]):
        path = save_heatmaps(tmp_path / f"m{len(markers)}.png", maps, markers=markers, diverging=True)
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("L"), dtype=float))
    plain, starred = images
    change = np.abs(starred - plain)
    return change[change > 30]


@pytest.mark.parametrize("value", [1.0, -1.0, 0.0])  # dark red, dark blue, white cells
def test_a_star_stands_out_on_any_colour(tmp_path, value):
    assert (_star_pixels(tmp_path, value, (1, 1)) > 120).sum() >= 40  # a patch of strong contrast, not a thin line


def test_a_corner_star_is_drawn_whole(tmp_path):
    # on a 40x40 grid a cell is smaller than the star: a star clipped to the axes loses three quarters
    inside, corner = (len(_star_pixels(tmp_path, 1.0, cell, side=40)) for cell in ((19, 19), (0, 0)))
    assert corner > 0.9 * inside


def test_curve_panels_check_their_lengths(tmp_path):
    path = save_curve_panels(
        tmp_path / "p.png",
        [1, 2],
        {"a": {"x": [1.0, 2.0], "y": [1.0, 2.0]}, "b": {"x": [np.nan] * 2}},
        xlabel="k",
        ylabel="e",
    )
    assert_png(path)
    with pytest.raises(ValueError, match="curve 'x' of panel 'a' has 3 values for 2 x values"):
        save_curve_panels(tmp_path / "q.png", [1, 2], {"a": {"x": [1.0, 2.0, 3.0]}}, xlabel="k", ylabel="e")


def test_pyramid_equivariance_draws_one_panel_per_stage(tmp_path, monkeypatch, capsys):
    drawn = {}

    def record(path, x, panels, **kwargs):
        drawn.update(panels)
        return save_curve_panels(path, x, panels, **kwargs)

    monkeypatch.setattr("vitpos.commands.equivariance.save_curve_panels", record)
    argv = ["equivariance", *PYRAMID_ARGS["pvt"], "--images", "2", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert list(drawn) == ["stage 0 features", "stage 1 features", "stage 2 features", "stage 3 features", "logits"]
    sweep = json.loads((tmp_path / "equivariance.json").read_text())["sweep"]
    for stage in range(4):
        for direction, results in sweep.items():
            expected = [np.nan if r is None else r["stage_errors"][stage] for r in results]
            np.testing.assert_allclose(drawn[f"stage {stage} features"][direction], expected)
    assert set(drawn["logits"]) == {"down", "right", "diagonal"}
    assert_png(tmp_path / "equivariance.png")
