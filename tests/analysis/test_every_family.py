"""Every analysis tool runs on every registered encoding family and returns numbers in range."""

import math

import pytest
import torch

from vitpos.analysis.attention import attention_maps, mean_attention_distance, uniform_attention_distance
from vitpos.analysis.awareness import position_awareness
from vitpos.analysis.equivariance import equivariance_error
from vitpos.analysis.probes import probe_table
from vitpos.analysis.relative_maps import bias_maps, relative_logit_bias
from vitpos.analysis.similarity import locality, similarity_maps
from vitpos.analysis.tables import NoPositionTableError, layer_position_encodings

from .families import FAMILIES, tiny_model


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_tool_on_family(family):
    model = tiny_model(FAMILIES[family], head="gap", img_size=(32, 40))  # grid 4x5
    grid = (4, 5)
    images = torch.randn(6, 3, 32, 40)

    weights = attention_maps(model, images)
    assert len(weights) == 2 and torch.allclose(weights[0].sum(-1), torch.ones(1), atol=1e-5)
    distance = mean_attention_distance(weights[-1], grid, model.num_prefix_tokens)
    assert ((distance >= 0) & (distance <= math.hypot(3, 4))).all()
    assert uniform_attention_distance(grid) <= math.hypot(3, 4)

    eq = equivariance_error(model, images, (1, 1), margin=0)
    assert math.isfinite(eq.feature_error) and eq.feature_error >= 0 and eq.logit_change >= 0

    aware = position_awareness(model, images, folds=3)
    assert aware.r2 <= 1.0 and 0.0 <= aware.cell_accuracy <= 1.0

    try:
        tables = layer_position_encodings(model, grid)
    except NoPositionTableError:
        tables = {}
    assert bool(tables) == (FAMILIES[family].get("absolute", "learned") != "none")
    for table in tables.values():
        probe = probe_table(table, grid, folds=3)
        assert 0.0 <= probe.left_right <= 1.0 and 0.0 <= probe.up_down <= 1.0 and probe.distance_r2 <= 1.0
        maps = similarity_maps(table, grid, [(0, 0), (2, 3)])
        assert maps.shape == (2, 4, 5) and maps.abs().max() <= 1 + 1e-5
        assert -2.0 <= locality(table, grid) <= 2.0

    if FAMILIES[family].get("relative", "none") != "none":
        try:
            bias = relative_logit_bias(model, 0, images)
        except ValueError as err:  # rotary encodings add no logit term
            assert "adds no logit term" in str(err)
        else:
            maps = bias_maps(bias, grid, [(1, 1)], model.num_prefix_tokens)
            assert maps.shape[1:] == (1, 4, 5) and torch.isfinite(maps).all()
