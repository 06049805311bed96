"""Figures are valid PNG files."""

import pytest
import torch
from PIL import Image

from vitpos.analysis.plots import save_curves, save_heatmaps

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and min(image.size) > 50


def test_heatmaps_continuous_and_categorical(tmp_path):
    assert_png(
        save_heatmaps(
            tmp_path / "a" / "maps.png",
            torch.rand(2, 3, 4, 5),
            row_labels=["x", "y"],
            col_labels=["1", "2", "3"],
            markers=[(0, 0), None, (3, 4)],
            title="t",
        )
    )
    assert_png(save_heatmaps(tmp_path / "ids.png", torch.randint(0, 50, (1, 2, 7, 7)), categorical=True))


def test_curves_with_gaps(tmp_path):
    series = {"a": ([0.5, 0.7, 0.9], [0.1, 0.05, 0.0]), "b": ([float("nan"), 0.6, 0.8], [0.0, 0.1, 0.1])}
    assert_png(save_curves(tmp_path / "c.png", [100, 300, 1000], series, xlabel="n", ylabel="acc", logx=True))


def test_bad_shapes_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"\(rows, cols, H, W\)"):
        save_heatmaps(tmp_path / "x.png", torch.rand(3, 4, 5))
    with pytest.raises(ValueError, match="series 'a' has 2 means"):
        save_curves(tmp_path / "x.png", [1, 2, 3], {"a": ([1, 2], [0, 0])}, xlabel="x", ylabel="y")
