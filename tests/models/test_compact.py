"""Compact Transformers (ViT-Lite, CVT, CCT): the papers' sizes, sequence pooling, every slot, training on CIFAR."""

import pytest
import torch

import vitpos
from vitpos.engine import RunRequest, train
from vitpos.engine.recipes import get_recipe
from vitpos.models.seq_pool import SequencePool

from ..data.test_cifar import make_cifar

# Hassani et al. 2021, Table 1 (32 px, 10 classes), and LaPE Table 2's models
PAPER_MILLIONS = {"vit_lite_7_4_compact": 3.72, "cvt_7_4": 3.72, "cct_7_3x1": 3.76}
EXACT = {"vit_lite_7_4_compact": 3_716_874, "cvt_7_4": 3_716_619, "cct_7_3x1": 3_760_139}
TINY = dict(embed_dim=16, depth=2, num_heads=2, img_size=16)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(EXACT))
def test_parameter_counts_are_the_papers(name):
    with torch.device("meta"):
        base, lape = vitpos.create_model(name), vitpos.create_model(f"{name}_lape")
    assert count(base) == EXACT[name]
    assert round(count(base) / 1e6, 2) == PAPER_MILLIONS[name]
    assert count(lape) - count(base) == 2 * 256 * 7  # LaPE: a LayerNorm of the embedding per layer


def test_cct_without_embedding_drops_exactly_the_table():
    with torch.device("meta"):
        plain = vitpos.create_model("cct_7_3x1", absolute="none")
    assert EXACT["cct_7_3x1"] - count(plain) == 16 * 16 * 256


@pytest.mark.parametrize("name", sorted(EXACT))
@pytest.mark.parametrize(("hw", "reg_tokens"), [((16, 16), 0), ((24, 16), 2), ((20, 28), 1)])
def test_shapes_at_several_grids_with_prefix_tokens(name, hw, reg_tokens):
    model = vitpos.create_model(name, **TINY, num_classes=3, reg_tokens=reg_tokens).eval()
    x = torch.randn(2, 3, *hw)
    (grid,) = model.stage_grids(hw)
    tokens = model.forward_tokens(x)
    assert tokens.shape == (2, model.num_prefix_tokens + grid[0] * grid[1], 16)
    assert model.num_prefix_tokens == reg_tokens + int(name == "vit_lite_7_4_compact")
    assert model(x).shape == (2, 3)
    (features,) = model.forward_features(x)
    assert features.shape == (2, 16, *grid)


def test_cct_grid_is_the_tokenizers_arithmetic():
    model = vitpos.create_model("cct_7_3x1", **TINY)
    # 3x3 conv (stride 1, padding 1) keeps the size; 3x3 max-pool, stride 2, padding 1: ceil(side / 2)
    assert model.stage_grids((17, 32)) == [(9, 16)]
    assert model.forward_tokens(torch.randn(1, 3, 17, 32)).shape[1] == 9 * 16


def test_sequence_pooling_is_the_softmax_weighted_mean():
    pool = SequencePool(8).double()
    torch.nn.init.normal_(pool.score.weight)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    weights = torch.exp(x @ pool.score.weight[0] + pool.score.bias)
    expected = (weights[..., None] * x).sum(1) / weights.sum(1, keepdim=True)
    torch.testing.assert_close(pool(x), expected)


def test_sequence_pooling_reads_the_patch_tokens_only():
    model = vitpos.create_model("cct_7_3x1", **TINY, reg_tokens=1).eval()
    x = torch.randn(2, 3, 16, 16)
    tokens = model.forward_tokens(x)
    pooled = model.forward_head(tokens, pre_logits=True)
    torch.testing.assert_close(pooled, model.attention_pool(tokens[:, 1:]))
    tokens[:, 0] += 10.0  # the register changes nothing the head reads
    torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), pooled)


@pytest.mark.parametrize(
    "slots",
    [
        {"absolute": "sincos2d", "join": "lape"},
        {"absolute": "learned", "join": "lape:eta=1"},
        {"absolute": "none", "conditional": "peg@0"},
        {"absolute": "none", "relative": "irpe:product:ctx:qkv"},
        {"absolute": "learned", "relative": "rope2d"},
    ],
)
def test_every_slot_trains_in_cct(slots):
    model = vitpos.create_model("cct_7_3x1", **TINY, num_classes=3, **slots)
    x = torch.randn(2, 3, 16, 16)
    model(x).square().sum().backward()
    position = model.position_parameters()
    assert position and all(p.grad is not None and p.grad.abs().sum() > 0 for p in position.values())
    assert model.eval()(torch.randn(1, 3, 24, 20)).shape == (1, 3)


@pytest.mark.parametrize("name", ["cct_7_3x1", "cct_7_3x1_lape"])
def test_cct_trains_on_cifar_format_batches(tmp_path, name):
    make_cifar(tmp_path, per_file=8)
    recipe = get_recipe("cct_cifar10")  # LaPE Table 7's CIFAR row, shortened to one epoch of 5 steps
    short = {"epochs": 1, "cooldown_epochs": 0, "warmup_epochs": 0, "batch_size": 8, "progress": False}
    request = RunRequest(name, {**recipe.model, "depth": 2}, {**recipe.train, "data": f"cifar10:{tmp_path}", **short})
    before = vitpos.create_model(name, depth=2)
    result = train(*request.resolve())
    assert result.history[-1]["step"] == 40 // 8
    assert torch.isfinite(torch.tensor(result.history[-1]["train_loss"]))
    trained = dict(result.model.named_parameters())
    assert ("stages.0.join.pe_norm.weight" in trained) == name.endswith("_lape")
    changed = [n for n, p in before.named_parameters() if not torch.equal(p, trained[n].detach().cpu())]
    assert "stages.0.absolute.table" in changed and "attention_pool.score.weight" in changed


def test_padded_cvt_gives_each_image_its_own_sequence_pooling():
    model = vitpos.create_model("cvt_7_4", **TINY, num_classes=3).double().eval()
    alone = torch.randn(1, 3, 12, 8, dtype=torch.float64)
    batch = torch.zeros(2, 3, 16, 16, dtype=torch.float64)
    batch[0, :, :12, :8] = alone[0]
    batch[1] = torch.randn(3, 16, 16, dtype=torch.float64)
    mask = torch.zeros(2, 16, 16, dtype=torch.bool)
    mask[0, 12:, :] = True
    mask[0, :, 8:] = True
    with torch.no_grad():
        torch.testing.assert_close(model(batch, padding_mask=mask)[0], model(alone)[0])


@pytest.mark.parametrize("name", ["cct_7_3x1", "t2t_vit_7", "ceit_tiny"])
def test_stems_that_mix_patches_refuse_a_padding_mask(name):
    options = {"cct_7_3x1": TINY, "t2t_vit_7": dict(TINY, token_dim=8, img_size=32)}.get(
        name, dict(TINY, patch_size=2, stem_channels=8, img_size=32)
    )
    model = vitpos.create_model(name, **options)
    with pytest.raises(vitpos.VitposError, match="cannot take a padding_mask"):
        model(torch.randn(1, 3, 32, 32), padding_mask=torch.zeros(1, 32, 32, dtype=torch.bool))
