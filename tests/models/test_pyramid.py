"""Both pyramid hosts: stage shapes at many sizes, every slot per stage, heads, training, errors."""

import pytest
import torch

import vitpos
from vitpos import PyramidConfig
from vitpos.engine import TrainConfig, train
from vitpos.models.layers import Attention
from vitpos.registry import ABSOLUTE, JOIN
from vitpos.weights import load_model

from ..conftest import TINY_PVT, TINY_SWIN

HOSTS = {"pvt": TINY_PVT, "swin": TINY_SWIN}
SIZES = [(32, 32), (48, 16), (16, 80)]


def tiny(arch: str, **slots) -> torch.nn.Module:
    return vitpos.create_model(PyramidConfig(**HOSTS[arch]), **slots)


def same_weights(model: torch.nn.Module, source: torch.nn.Module) -> torch.nn.Module:
    """``model`` in float64 and eval mode with every weight it shares with ``source`` copied from it."""
    model = model.double().eval()
    missing, _ = model.load_state_dict(source.state_dict(), strict=False)
    assert set(missing) <= set(model.position_parameters())
    return model


def stage_tokens(width: int, grid: tuple[int, int]) -> torch.Tensor:
    """Random float64 tokens (2, H*W, width) for a stage at ``grid``."""
    return torch.randn(2, grid[0] * grid[1], width, dtype=torch.float64)


def expected_maps(cfg, batch, size):
    return [(batch, cfg.embed_dims[s], *cfg.stage_grid(s, size)) for s in range(cfg.num_stages)]


@pytest.mark.parametrize("name", ["pvt_tiny", "pvt_small_peg_gap"])
@pytest.mark.parametrize("size", [(224, 224), (256, 320), (96, 160)])
def test_full_size_stage_shapes(name, size):
    cfg = vitpos.get_config(name)
    with torch.device("meta"):
        model = vitpos.create_model(name)
        maps = model.forward_features(torch.empty(2, 3, *size))
        logits = model(torch.empty(2, 3, *size))
    assert [m.shape for m in maps] == expected_maps(cfg, 2, size)
    assert logits.shape == (2, 1000)


@pytest.mark.parametrize("arch", HOSTS)
@pytest.mark.parametrize("size,batch", list(zip(SIZES, [1, 3, 2], strict=True)))
def test_stage_shapes_at_every_size(arch, size, batch):
    model = tiny(arch, absolute="learned", conditional="peg@0")
    maps = model.forward_features(torch.randn(batch, 3, *size))
    assert [m.shape for m in maps] == expected_maps(model.cfg, batch, size)
    assert model(torch.randn(batch, 3, *size)).shape == (batch, 5)


@pytest.mark.parametrize("arch", HOSTS)
@pytest.mark.parametrize("absolute", ABSOLUTE.names())
def test_every_absolute_encoding_per_stage(arch, absolute):
    model = tiny(arch, absolute=absolute)
    for stage, width in zip(model.stages, model.embed_dims, strict=True):
        if absolute == "none":
            assert stage.absolute is None
        else:
            assert stage.absolute.embed_dim == width
            assert stage.position_encoding((3, 5)).shape == (1, 15, width)
    model(torch.randn(2, 3, 48, 16)).sum().backward()  # off the native grids
    # the input join adds each stage's encoding to its tokens: the stage equals the bare stage at x + pe
    model, bare = model.double().eval(), same_weights(tiny(arch, absolute="none"), model)
    grids = model.stage_grids((48, 16))
    for stage, without, grid, width in zip(model.stages, bare.stages, grids, model.embed_dims, strict=True):
        x = stage_tokens(width, grid)
        pe = stage.position_encoding(grid)
        torch.testing.assert_close(stage(x, grid, 0), without(x if pe is None else x + pe, grid, 0))
        assert (pe is None) == torch.allclose(stage(x, grid, 0), without(x, grid, 0))


@pytest.mark.parametrize("arch", HOSTS)
@pytest.mark.parametrize("join", JOIN.names())
def test_every_join_per_stage(arch, join):
    model = tiny(arch, absolute="learned", join=join)
    assert all(stage.join.depth == depth for stage, depth in zip(model.stages, model.cfg.depths, strict=True))
    assert model(torch.randn(2, 3, 16, 48)).shape == (2, 5)
    # every stage applies its join: on a block beyond the input (shared, unshared), in a norm (lape), or
    # to queries and keys only (detr), so a stage equals its input-join twin only where it cannot differ
    model = model.double().eval()
    at_input = same_weights(tiny(arch, absolute="learned"), model)
    grids = model.stage_grids((16, 48))
    for stage, twin, grid, width in zip(model.stages, at_input.stages, grids, model.embed_dims, strict=True):
        x = stage_tokens(width, grid)
        one_block_adds_once = join in ("shared", "unshared") and len(stage.blocks) == 1
        assert torch.allclose(stage(x, grid, 0), twin(x, grid, 0)) == (join == "input" or one_block_adds_once)


@pytest.mark.parametrize("arch", HOSTS)
def test_lape_adds_one_layernorm_per_block_at_the_stage_width(arch):
    def count(**slots):
        return sum(p.numel() for p in tiny(arch, absolute="learned", **slots).parameters())

    cfg = PyramidConfig(**HOSTS[arch])
    per_block = sum(2 * width * depth for width, depth in zip(cfg.embed_dims, cfg.depths, strict=True))
    assert count(join="lape") - count() == per_block
    assert count(join="lape:eta=1") - count() == sum(2 * width for width in cfg.embed_dims)  # eta counts per stage


def test_learned_tables_per_stage_grid_and_class_token_row():
    model = vitpos.create_model(PyramidConfig(**TINY_PVT, head="cls"))
    tables = [tuple(s.absolute.table.shape) for s in model.stages]
    assert tables == [(1, 256, 8), (1, 64, 16), (1, 16, 24), (1, 4, 32)]
    assert [s.absolute.prefix_table is not None for s in model.stages] == [False, False, False, True]
    feats = model.forward_stages(torch.randn(2, 3, 32, 32))[1]
    assert feats.shape == (2, 1 + 4, 32)
    assert torch.allclose(model.forward_head(feats, pre_logits=True), feats[:, 0])


@pytest.mark.parametrize("arch", HOSTS)
def test_peg_after_the_first_block_of_every_stage(arch):
    model = tiny(arch, absolute="none", conditional="peg@0")
    for stage, width in zip(model.stages, model.embed_dims, strict=True):
        assert stage.conditional.positions == (0,)
        conv = stage.conditional.generators["0"].proj[0]
        assert (conv.in_channels, conv.groups, conv.kernel_size) == (width, width, (3, 3))
    calls = []
    for s, stage in enumerate(model.stages):
        stage.conditional.register_forward_hook(lambda mod, args, out, s=s: calls.append((s, args[0], args[2])))
    model(torch.randn(1, 3, 48, 32))
    assert calls == [(s, 0, model.cfg.stage_grid(s, (48, 32))) for s in range(4)]


@pytest.mark.parametrize("arch", HOSTS)
def test_placements_are_checked_against_each_stage_depth(arch):
    with pytest.raises(ValueError, match=r"stage 0 \(width 8, depth \d\):.*do not exist in a model of depth"):
        tiny(arch, absolute="none", conditional="peg@0-5")


@pytest.mark.parametrize("arch", HOSTS)
def test_gap_head_averages_the_last_map(arch):
    model = tiny(arch).eval()
    x = torch.randn(2, 3, 32, 32)
    last = model.forward_features(x)[-1]
    pooled = model.forward_head(model.forward_stages(x)[1], pre_logits=True)
    assert torch.allclose(pooled, last.mean(dim=(2, 3)), atol=1e-6)


@pytest.mark.parametrize("arch", HOSTS)
def test_inputs_must_be_multiples_of_the_total_stride(arch):
    model = tiny(arch)
    with pytest.raises(ValueError, match="not divisible by this pyramid's total stride 16"):
        model(torch.randn(1, 3, 40, 32))
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, H, W\)"):
        model(torch.randn(1, 1, 32, 32))


@pytest.mark.parametrize("arch", HOSTS)
def test_fused_and_explicit_attention_agree(arch):
    model = tiny(arch, absolute="sincos2d").eval()
    x = torch.randn(2, 3, 48, 32)
    fused = model(x)
    for module in model.modules():
        if isinstance(module, Attention):
            module.path = "explicit"
    assert torch.allclose(fused, model(x), atol=1e-5)


def test_no_weight_decay_names_position_parameters():
    model = vitpos.create_model(PyramidConfig(**TINY_PVT, head="cls"), conditional="peg@0")
    names = model.no_weight_decay()
    assert "cls_token" in names and "stages.3.absolute.prefix_table" in names
    assert "stages.2.conditional.generators.0.proj.0.weight" in names
    assert not any("qkv" in n or "downsamples" in n for n in names)
    assert len(names) == 1 + 4 * 1 + 1 + 4 * 2  # class token, 4 tables, 1 prefix row, 4 PEGs (weight, bias)


VARIANTS = [
    ("pvt_tiny", {}),
    ("pvt_tiny_peg_gap", {}),
    ("pvt_tiny", dict(absolute="fourier", conditional="peg@-1", join="lape")),
    ("swin_tiny", {}),
    ("swin_tiny_peg_gap", {}),
    ("swin_tiny_irpe_bias", {}),
    ("swin_tiny_irpe_ctx", {}),
    ("swin_tiny_lape", {}),
    ("swin_tiny", dict(relative="rope2d", absolute="learned", join="shared")),
]
"""Every pyramid preset's slots (and a few other combinations) on a tiny host of its kind."""


@pytest.mark.parametrize("name,slots", VARIANTS)
def test_variants_train_through_the_engine(name, slots, tmp_path, one_thread):
    sizes = {**HOSTS[vitpos.get_config(name).arch], "num_classes": 2}
    cfg = vitpos.get_config(name, **sizes, **slots)
    options = TrainConfig(
        data="synthetic:direction:img=32:train=96:val=32:test=32",
        epochs=3,
        batch_size=32,
        lr=3e-3,
        warmup_epochs=0,
        progress=False,
        run_dir=str(tmp_path),
    )
    result = train(cfg, options)
    losses = [row["train_loss"] for row in result.history]
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    torch.manual_seed(options.seed)  # the engine's initialisation
    initial = dict(vitpos.create_model(cfg).named_parameters())
    trained = dict(result.model.named_parameters())
    position = result.model.no_weight_decay()
    assert position and all(not torch.equal(trained[n].cpu(), initial[n]) for n in position)  # all learned
    rebuilt, ckpt = load_model(tmp_path)  # the checkpoint holds the pyramid config
    assert ckpt.model_config == cfg
    x = torch.randn(2, 3, 32, 64)
    assert torch.allclose(rebuilt(x), result.model.cpu().eval()(x))


def test_models_command_lists_the_pyramids_with_counts(capsys):
    from vitpos.cli import main

    assert main(["models", "*_tiny*"]) == 0
    out = capsys.readouterr().out
    assert "pvt_tiny_peg_gap" in out and "12,849,640" in out and "none / input / peg@0 / none" in out
    assert "swin_tiny" in out and "28,288,354" in out and "none / input / none / swin" in out
