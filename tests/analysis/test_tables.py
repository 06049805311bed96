"""Reading the position signal out of a model: absolute table and per-layer terms."""

import pytest
import torch

from vitpos.analysis.tables import NoPositionTableError, absolute_table, layer_position_encodings
from vitpos.encodings.join import Join, JoinTerms
from vitpos.encodings.sincos import sincos_2d
from vitpos.models.vit import slot_context

from .families import tiny_model


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
    assert torch.equal(tables["absolute"], model.absolute.table[0].detach())


class PerLayerJoin(Join):
    """A join that scales the PE differently at each block's attention input, and adds it to the stream at block 1."""

    def terms(self, pe, grid):
        return JoinTerms(residual=(None, 3 * pe), attention=(2 * pe,))


def test_per_layer_terms_are_read_through_the_join_interface():
    model = tiny_model({"absolute": "sincos2d"})
    model.join = PerLayerJoin(slot_context(model.cfg))
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
    with torch.no_grad():
        model.join.pe_norm.weight.normal_()  # distinct per-layer affine, as after training
    grid = (4, 4)
    tables = layer_position_encodings(model, grid)
    assert list(tables) == ["absolute", "block 0"]  # eta=1: block 1 gets no position term
    pe = model.position_encoding(grid)
    expected = torch.nn.functional.layer_norm(pe, (32,), eps=model.join.pe_norm.eps)
    expected = expected * model.join.pe_norm.weight[0] + model.join.pe_norm.bias[0]
    assert torch.allclose(tables["block 0"], expected[0, 1:], atol=1e-5)


def test_unshared_join_gives_each_block_its_own_table():
    model = tiny_model({"absolute": "learned", "join": "unshared"})
    tables = layer_position_encodings(model)
    assert list(tables) == ["absolute", "block 0", "block 1"]
    assert torch.equal(tables["block 1"], model.join.layer_table(1, (4, 4))[0, 1:].detach())
