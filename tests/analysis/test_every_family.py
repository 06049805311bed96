"""Every analysis tool runs on every registered encoding family, on every host, and returns numbers in range."""

import math

import pytest
import torch

from vitpos.analysis.attention import attention_maps, mean_attention_distance, uniform_attention_distance
from vitpos.analysis.awareness import position_awareness
from vitpos.analysis.equivariance import equivariance_error
from vitpos.analysis.probes import probe_table
from vitpos.analysis.relative_maps import bias_maps, relative_attention_layers, relative_logit_bias
from vitpos.analysis.similarity import locality, similarity_maps
from vitpos.analysis.tables import NoPositionTableError, layer_position_encodings

from .families import FAMILIES, tiny_model, tiny_pyramid

PYRAMID_FAMILIES = (
    "absolute=learned",
    "absolute=sincos2d",
    "peg",
    "irpe product",
    "swin",
    "rope2d",
    "lape swin",
    "unshared",
)
"""A family of each kind, for the pyramid hosts."""


def _every_tool(model, images: torch.Tensor, slots: dict[str, str]) -> None:
    """Run every tool on the last stage of ``model`` (and attention on every stage); check ranges."""
    grids = model.stage_grids(tuple(images.shape[-2:]))
    grid = grids[-1]
    maps = attention_maps(model, images)
    assert len(maps) == sum(len(stage.blocks) for stage in model.stages)
    for m in maps:
        assert m.grid == grids[m.stage] and torch.allclose(m.weights.sum(-1), torch.ones(1), atol=1e-5)
        far = math.hypot(*m.grid)
        distance = mean_attention_distance(m.weights, m.grid, m.num_prefix_tokens, m.key_stride)
        assert ((distance >= 0) & (distance <= far)).all()
        assert uniform_attention_distance(m.grid, m.key_stride) <= far

    eq = equivariance_error(model, images, (1, 1), margin=0)
    assert math.isfinite(eq.feature_error) and eq.feature_error >= 0 and eq.logit_change >= 0
    assert len(eq.stage_errors) == len(model.stages) and eq.stage_errors[-1] == eq.feature_error

    aware = position_awareness(model, images, folds=3)
    assert aware.r2 <= 1.0 and 0.0 <= aware.cell_accuracy <= 1.0

    try:
        tables = layer_position_encodings(model, grid)
    except NoPositionTableError:
        tables = {}
    assert bool(tables) == (slots.get("absolute", model.cfg.position.absolute) != "none")
    for table in tables.values():
        probe = probe_table(table, grid, folds=3)
        assert 0.0 <= probe.left_right <= 1.0 and 0.0 <= probe.up_down <= 1.0 and probe.distance_r2 <= 1.0
        sims = similarity_maps(table, grid, [(0, 0), (2, 3)])
        assert sims.shape == (2, *grid) and sims.abs().max() <= 1 + 1e-5
        assert -2.0 <= locality(table, grid) <= 2.0

    if slots.get("relative", "none") != "none":
        layer = relative_attention_layers(model)[0]
        seen, prefix = layer.view(model, tuple(images.shape[-2:]))
        try:
            bias = relative_logit_bias(model, 0, images)
        except ValueError as err:  # rotary encodings add no logit term
            assert "adds no logit term" in str(err)
        else:
            biased = bias_maps(bias, seen, [(1, 1)], prefix)
            assert biased.shape[1:] == (1, *seen) and torch.isfinite(biased).all()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_tool_on_family(family):
    model = tiny_model(FAMILIES[family], head="gap", img_size=(32, 40))  # grid 4x5
    _every_tool(model, torch.randn(6, 3, 32, 40), FAMILIES[family])


@pytest.mark.parametrize("arch", ["pvt", "swin"])
@pytest.mark.parametrize("family", [f for f in PYRAMID_FAMILIES if f in FAMILIES])
def test_every_tool_on_pyramid(arch, family):
    slots = {"absolute": "none", **FAMILIES[family]}
    # relative encodings need PVT's keys on the query grid: no spatial reduction
    reduction = {"sr_ratios": None} if arch == "pvt" and slots.get("relative", "none") != "none" else {}
    model = tiny_pyramid(arch, slots, img_size=(64, 80), **reduction)  # last stage 4x5
    _every_tool(model, torch.randn(6, 3, 64, 80), slots)
