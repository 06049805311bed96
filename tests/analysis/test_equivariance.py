"""Translation equivariance: shifts, interior cells, and models that are or are not equivariant."""

import pytest
import torch

from vitpos.analysis.equivariance import equivariance_error, interior_mask, translate

from .families import tiny_model, tiny_pyramid


def test_translate_roll_and_zero_by_hand():
    x = torch.arange(12.0).reshape(1, 3, 4)
    assert torch.equal(translate(x, (1, 0), "roll")[0, 0], x[0, 2])
    zero = translate(x, (1, -1), "zero")[0]
    assert torch.equal(zero[0], torch.zeros(4))
    assert torch.equal(zero[1], torch.tensor([1.0, 2.0, 3.0, 0.0]))  # row 0 moved down, left by one
    assert torch.equal(translate(x, (3, 0), "zero"), torch.zeros_like(x))
    with pytest.raises(ValueError, match="valid values: roll, zero"):
        translate(x, (1, 1), "wrap")


def test_interior_mask_by_hand():
    # zero fill: target rows 1..3 whose source rows (t - 1) are in 1..3: rows 2..3; cols 1..4 with t - 2 in 1..4: 3..4
    expected = torch.zeros(5, 6, dtype=torch.bool)
    expected[2:4, 3:5] = True
    assert torch.equal(interior_mask((5, 6), (1, 2), margin=1, mode="zero"), expected)
    # shift 3 columns on 8: zero fill keeps targets 4..6; a roll also keeps target 1, whose source 6 wrapped
    assert interior_mask((4, 8), (0, 3), margin=1, mode="zero")[1].nonzero().flatten().tolist() == [4, 5, 6]
    assert interior_mask((4, 8), (0, 3), margin=1, mode="roll")[1].nonzero().flatten().tolist() == [1, 4, 5, 6]
    assert interior_mask((4, 4), (1, 3), margin=0, mode="roll").all()
    assert interior_mask((4, 4), (1, 3), margin=0, mode="zero").sum() == 3 * 1


def _float64(model):
    return model.double()


def test_no_position_gap_model_is_exactly_equivariant_and_invariant():
    model = _float64(tiny_model({"absolute": "none"}, head="gap"))
    images = torch.randn(2, 3, 40, 48, dtype=torch.float64)
    result = equivariance_error(model, images, (2, -1), margin=0)
    assert result.feature_error < 1e-10 and result.logit_change < 1e-10
    assert result.interior_cells == 5 * 6


def test_circular_peg_gap_model_is_equivariant_and_zero_padding_breaks_it_at_the_border():
    images = torch.randn(2, 3, 40, 48, dtype=torch.float64)
    circular = _float64(tiny_model({"absolute": "none", "conditional": "peg@0-2:pad=circular"}, head="gap"))
    result = equivariance_error(circular, images, (2, -3), margin=0)
    assert result.feature_error < 1e-10 and result.logit_change < 1e-10
    zeros = _float64(tiny_model({"absolute": "none", "conditional": "peg@0-2"}, head="gap"))
    with torch.no_grad():
        for p in zeros.stages[0].conditional.parameters():
            p.normal_(0, 0.5)  # a strong PEG, as after training
    assert equivariance_error(zeros, images, (2, -3), margin=0).feature_error > 1e-3


def test_learned_position_model_is_not_equivariant():
    model = _float64(tiny_model({"absolute": "learned"}, head="gap"))
    with torch.no_grad():
        model.stages[0].absolute.table.normal_(0, 1.0)  # a trained table is far from its 0.02 init
    result = equivariance_error(model, torch.randn(2, 3, 32, 32, dtype=torch.float64), (1, 1))
    assert result.feature_error > 0.05 and result.logit_change > 1e-4


def test_zero_fill_shift_of_a_black_border_is_equivariant_without_position():
    # a shift that only moves black patches in and out is a permutation of the tokens
    model = _float64(tiny_model({"absolute": "none"}, head="gap"))
    images = torch.zeros(2, 3, 48, 48, dtype=torch.float64)
    images[:, :, 8:40, 8:40] = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    result = equivariance_error(model, images, (1, -1), mode="zero", margin=0)
    assert result.feature_error < 1e-10 and result.logit_change < 1e-10


def test_cls_model_reports_logits_and_headless_model_none():
    images = torch.randn(1, 3, 32, 32)
    assert equivariance_error(tiny_model({"absolute": "none"}), images).logit_change is not None
    assert equivariance_error(tiny_model({"absolute": "none"}, num_classes=0), images).logit_change is None


def test_no_interior_left_is_a_clear_error():
    with pytest.raises(ValueError, match="no interior cells"):
        equivariance_error(tiny_model({"absolute": "none"}), torch.randn(1, 3, 32, 32), (3, 0), mode="zero")


def test_pvt_without_table_is_exactly_equivariant_at_every_stage():
    # a shift of one last-stage token (16 px) moves stage s by 8 / 2**s cells: whole multiples of
    # the strided patch embeddings and of the spatial reductions (4, 2, 1, 1), so nothing breaks it
    model = _float64(tiny_pyramid("pvt", {"absolute": "none"}, img_size=64))
    images = torch.randn(2, 3, 64, 80, dtype=torch.float64)
    result = equivariance_error(model, images, (1, -2), margin=0)
    assert len(result.stage_errors) == 4 and max(result.stage_errors) < 1e-10 and result.logit_change < 1e-10
    assert result.interior_cells == 4 * 5
    learned = _float64(tiny_pyramid("pvt", {"absolute": "learned"}, img_size=64))  # a trained table breaks it
    with torch.no_grad():
        for stage in learned.stages:
            stage.absolute.table.normal_(0, 1.0)
    assert min(equivariance_error(learned, images, (1, 1), margin=0).stage_errors) > 0.05


def test_swin_is_equivariant_where_the_shift_moves_whole_windows():
    images = torch.randn(2, 3, 64, 64, dtype=torch.float64)  # grids 32, 16, 8, 4 in 4x4 windows
    # windows that cover every grid attend globally: no relative bias, no table, exact everywhere
    global_windows = _float64(tiny_pyramid("swin", {"relative": "none"}, img_size=64, window_size=32))
    result = equivariance_error(global_windows, images, (1, 1), margin=0)
    assert max(result.stage_errors) < 1e-10 and result.logit_change < 1e-10
    # the shift moves stages 0 and 1 by 8 and 4 cells (whole windows): their windows and relative
    # bias see the same content, exactly; stage 2 moves by half a window, which changes what it sees
    windowed = _float64(tiny_pyramid("swin", img_size=64))
    errors = equivariance_error(windowed, images, (1, 1), margin=0).stage_errors
    assert max(errors[:2]) < 1e-10 and min(errors[2:]) > 1e-3
    # a shifted block's mask marks the regions of the last window row, which the content moves past
    shifted = _float64(tiny_pyramid("swin", img_size=64, depths=(2, 1, 1, 1)))
    assert equivariance_error(shifted, images, (1, 1), margin=0).stage_errors[0] > 1e-5


def test_pyramid_shift_must_be_in_whole_last_stage_tokens():
    model = tiny_pyramid("pvt")
    with pytest.raises(ValueError, match="multiples of the last stage's stride \\(16 pixels\\), got 40x32"):
        equivariance_error(model, torch.randn(1, 3, 40, 32))
