"""What the figures say: the model they show, a colour scale that separates the values, legends that
leave the axes their room, axes from zero where zero means "no change", titles apart from panel titles."""

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from vitpos.analysis.plots import save_bars, save_heatmaps
from vitpos.cli import main
from vitpos.study.claims import CLAIMS
from vitpos.study.figures import save_claim_figures
from vitpos.study.verdicts import REPRODUCED, Verdict

from ..commands.test_analysis_commands import TINY_ARGS


@pytest.fixture
def figures(monkeypatch) -> list[Figure]:
    """Every figure saved while the test runs (each still written)."""
    saved: list[Figure] = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def _renderer(fig: Figure):
    """The figure laid out and drawn on an Agg canvas, for the extents of its texts."""
    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return canvas.get_renderer()


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_attention_figures_name_the_model_and_spread_the_colours_over_the_weights(tmp_path, figures):
    args = ["attention", "--model=thesis_vit", *TINY_ARGS, "--absolute=sincos2d", "--images=2", "--no-progress"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert len(figures) == 2
    for fig in figures:
        assert fig._suptitle.get_text().startswith("thesis_vit (absolute=sincos2d"), fig._suptitle.get_text()
        images = [image for ax in fig.axes for image in ax.images]
        lowest = min(np.nanmin(np.asarray(image.get_array(), dtype=float)) for image in images)
        # near-uniform weights: the scale is their own range (0 to max would draw one colour)
        assert images[0].norm.vmin == pytest.approx(lowest) and lowest > 0


def test_a_heatmap_title_stays_clear_of_the_panel_titles(tmp_path, figures):
    title = "change of the cosine similarity to the reference cell (star) through training; each row scaled " * 2
    save_heatmaps(tmp_path / "h.png", np.random.default_rng(0).random((2, 3, 6, 6)), col_labels="abc", title=title)
    (fig,) = figures
    renderer = _renderer(fig)
    heading = fig._suptitle.get_window_extent(renderer)
    assert heading.x0 >= 0 and heading.x1 <= fig.bbox.width  # wrapped to the figure
    assert not any(_overlap(heading, ax.title.get_window_extent(renderer)) for ax in fig.axes if ax.get_title())


def test_a_bar_legend_sits_below_the_axes(tmp_path, figures):
    series = {name: [0.9, 0.5] for name in ("left/right accuracy", "up/down accuracy", "(dx, dy) R²")}
    save_bars(tmp_path / "b.png", ["absolute", "peg"], series, xlabel="table", ylabel="score", lines={"chance": 0.5})
    (fig,) = figures
    ax = fig.axes[0]
    renderer = _renderer(fig)
    assert ax.get_legend() is None and len(fig.legends) == 1
    assert fig.legends[0].get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0
    assert ax.get_position().width > 0.7  # the legend takes none of the axes' width


def test_equivariance_axes_start_at_zero_and_the_logits_panel_says_what_it_shows(tmp_path, figures):
    args = ["equivariance", *TINY_ARGS, "--img-size=16", "--absolute=sincos2d", "--images=2", "--no-progress"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    (fig,) = figures
    features, logits = fig.axes
    assert features.get_ylim()[0] == 0 and logits.get_ylim()[0] == 0
    assert "features" in features.get_ylabel() and "logits" in logits.get_ylabel()


def test_claim_figures_explain_their_marks(tmp_path, figures):
    claim = next(c for c in CLAIMS if c.percent)
    values = {seed: 95.0 + seed for seed in range(3)}
    save_claim_figures(tmp_path, [(claim, values, Verdict(REPRODUCED, 3, 96.0, 95.0, 97.0))])
    (fig,) = figures
    (legend,) = fig.legends
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels[0] == "one seed" and "the claim's bound" in labels and "the paper's value" in labels
