"""Reading the position signal out of a model: absolute table and per-layer terms."""

import pytest
import torch

from vitpos.analysis.tables import NoPositionTableError, absolute_table, layer_position_encodings
from vitpos.encodings.join import Join, JoinAdditions
from vitpos.encodings.sincos import sincos_2d

from .families import tiny_model, tiny_pyramid


@pytest.mark.parametrize("head", ["cls", "gap"])
def test_absolute_table_drops_prefix_rows(head):
    model = tiny_model({"absolute": "sincos2d"}, head=head)
    table = absolute_table(model)
    assert table.shape == (16, 32)
    assert torch.allclose(table, sincos_2d((4, 4), 32).float())
    assert absolute_table(model, (3, 5)).shape == (15, 32)


def test_input_join_gives_only_the_absolute_table():
    model = tiny_model({"absolute": "learned"})
    tables = layer_position_encodings(model)
    assert list(tables) == ["absolute"]
    assert torch.equal(tables["absolute"], model.stages[0].absolute.table[0].detach())


class PerLayerJoin(Join):
    """A join that scales the PE differently at each block's attention input, and adds it to the stream at block 1."""

    def additions(self, pe, grid):
        return JoinAdditions(residual=(None, 3 * pe), attention=(2 * pe,))


def test_per_layer_terms_are_read_through_the_join_interface():
    model = tiny_model({"absolute": "sincos2d"})
    model.stages[0].join = PerLayerJoin(model.cfg.stage_context(0))
    tables = layer_position_encodings(model)
    assert list(tables) == ["absolute", "block 0", "block 1"]
    assert torch.allclose(tables["block 0"], 2 * tables["absolute"])
    assert torch.allclose(tables["block 1"], 3 * tables["absolute"])


def test_model_without_table_is_a_clear_error():
    model = tiny_model({"absolute": "none"})
    with pytest.raises(NoPositionTableError, match="no absolute position table \\(absolute='none'\\)"):
        absolute_table(model)
    with pytest.raises(ValueError, match="no absolute position table"):
        layer_position_encodings(model)


def test_lape_gives_each_block_its_normalised_encoding():
    model = tiny_model({"absolute": "learned", "join": "lape:eta=1"})
    join = model.stages[0].join
    with torch.no_grad():
        join.pe_norm.weight.normal_()  # distinct per-layer affine, as after training
    grid = (4, 4)
    tables = layer_position_encodings(model, grid)
    assert list(tables) == ["absolute", "block 0"]  # eta=1: block 1 gets no position term
    pe = model.stages[0].position_encoding(grid)
    expected = torch.nn.functional.layer_norm(pe, (32,), eps=join.pe_norm.eps)
    expected = expected * join.pe_norm.weight[0] + join.pe_norm.bias[0]
    assert torch.allclose(tables["block 0"], expected[0, 1:], atol=1e-5)


def test_unshared_join_gives_each_block_its_own_table():
    model = tiny_model({"absolute": "learned", "join": "unshared"})
    tables = layer_position_encodings(model)
    assert list(tables) == ["absolute", "block 0", "block 1"]
    assert torch.equal(tables["block 1"], model.stages[0].join.layer_table(1, (4, 4))[0, 1:].detach())


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_every_stage_of_a_pyramid_has_its_own_table(arch):
    model = tiny_pyramid(arch, {"absolute": "sincos2d"})
    for stage, (grid, width) in enumerate(zip([(16, 16), (8, 8), (4, 4), (2, 2)], (8, 16, 24, 32), strict=True)):
        table = absolute_table(model, stage=stage)
        assert table.shape == (grid[0] * grid[1], width)
        assert torch.allclose(table, sincos_2d(grid, width).float())
    assert torch.equal(absolute_table(model), absolute_table(model, stage=3))  # the last stage by default
    assert absolute_table(model, (3, 5), stage=1).shape == (15, 16)
    with pytest.raises(ValueError, match="stage 4 does not exist: the model has 4 stage"):
        absolute_table(model, stage=4)


def test_pyramid_class_token_joins_the_last_stage_only():
    model = tiny_pyramid("pvt", {"absolute": "learned", "join": "unshared"}, head="cls")
    tables = layer_position_encodings(model)  # the last stage: its 2x2 cells, without the class token's row
    assert list(tables) == ["absolute", "block 0"] and tables["absolute"].shape == (4, 32)
    assert torch.equal(tables["absolute"], model.stages[3].position_encoding((2, 2))[0, 1:].detach())
    assert torch.equal(tables["block 0"], tables["absolute"])  # the unshared join's block 0 adds the table itself
    assert layer_position_encodings(model, stage=0)["absolute"].shape == (256, 8)


def test_swin_without_table_names_the_option():
    with pytest.raises(NoPositionTableError, match=r"absolute='none'.*\(absolute=NAME\)"):
        absolute_table(tiny_pyramid("swin"))
