"""Absolute-position awareness of token features."""

import pytest
import torch

from vitpos.analysis.awareness import position_awareness, token_features

from .families import tiny_model, tiny_pyramid


def test_token_features_of_a_block_equal_a_hook_free_forward():
    model = tiny_model({"absolute": "sincos2d"})
    x = torch.randn(2, 3, 32, 32)
    final = token_features(model, x)
    assert final.shape == (2, 16, 32)
    assert torch.allclose(final, model.forward_tokens(x)[:, 1:])
    first = token_features(model, x, block=0)
    block = model.stages[0].blocks[0]
    seen = []
    handle = block.register_forward_pre_hook(lambda _m, args: seen.append(args))
    model(x)
    handle.remove()
    with torch.no_grad():
        assert torch.allclose(first, block(*seen[0])[:, 1:], atol=1e-6)
    with pytest.raises(ValueError, match="block 5 does not exist; the model has 2 blocks"):
        token_features(model, x, block=5)


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_pyramid_token_features_per_stage(arch):
    model = tiny_pyramid(arch)
    x = torch.randn(2, 3, 32, 32)
    maps = model.forward_features(x)
    for stage, cells in enumerate((256, 64, 16, 4)):
        features = token_features(model, x, stage=stage)
        assert features.shape == (2, cells, model.cfg.embed_dims[stage])
        assert torch.allclose(features, maps[stage].flatten(2).transpose(1, 2), atol=1e-6)
        # one block per stage: an earlier stage's map is its block's output
        if stage < 3:
            assert torch.allclose(token_features(model, x, block=0, stage=stage), features, atol=1e-6)
    with pytest.raises(ValueError, match="block 1 does not exist; stage 2 has 1 blocks"):
        token_features(model, x, block=1, stage=2)


def test_a_fixed_table_makes_position_readable_on_a_pyramid_and_no_encoding_does_not():
    images = torch.randn(16, 3, 32, 32)  # stage 2: 4x4 cells of width 24
    with_table = position_awareness(tiny_pyramid("pvt", {"absolute": "sincos2d"}), images, stage=2)
    without = position_awareness(tiny_pyramid("pvt", {"absolute": "none"}), images, stage=2)
    assert with_table.r2 > 0.5 and without.r2 < 0.2


def test_a_fixed_table_makes_position_readable_and_no_encoding_does_not():
    images = torch.randn(24, 3, 32, 32)
    with_table = position_awareness(tiny_model({"absolute": "sincos2d"}, head="gap"), images)
    without = position_awareness(tiny_model({"absolute": "none"}, head="gap"), images)
    assert with_table.r2 > 0.5 and without.r2 < 0.2
    assert 0.0 <= without.cell_accuracy < with_table.cell_accuracy <= 1.0


def test_needs_two_images():
    with pytest.raises(ValueError, match="at least 2 images"):
        position_awareness(tiny_model({"absolute": "none"}), torch.randn(1, 3, 32, 32))


def test_zero_padded_peg_makes_position_readable_and_circular_padding_does_not():
    # CPVT §3.2 / appendix B.3: the zeros a PEG pads with mark the border cells wherever the
    # tokens have a non-zero mean, and the mixing spreads that to all cells; wrap-around marks nothing
    images = 1 + 0.3 * torch.randn(24, 3, 32, 32)
    zero_padded = position_awareness(tiny_model({"absolute": "none", "conditional": "peg@0"}), images)
    circular = position_awareness(tiny_model({"absolute": "none", "conditional": "peg@0:pad=circular"}), images)
    assert circular.r2 < 0.1 and zero_padded.r2 > 0.4
