"""Absolute encodings: layout, equalities, resampling, gradients, any grid."""

import math

import pytest
import torch

from vitpos.encodings.absolute import FourierPosition
from vitpos.encodings.base import SlotContext
from vitpos.encodings.sincos import sincos_1d, sincos_2d
from vitpos.grid import resample_table
from vitpos.registry import ABSOLUTE
from vitpos.spec import SlotSpec

CTX = SlotContext(embed_dim=16, num_heads=2, depth=2, grid=(4, 5), num_prefix_tokens=1)
ENCODINGS = [n for n in ABSOLUTE.names() if n != "none"]


def build(name: str, ctx: SlotContext = CTX):
    spec = SlotSpec.parse(name)
    ABSOLUTE.get(spec.name).validate(spec)
    return ABSOLUTE.get(spec.name).from_spec(spec, ctx)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("grid", [(4, 5), (1, 1), (3, 7), (9, 2), (12, 12)])
def test_shape_at_any_grid(name, grid):
    enc = build(name)
    out = enc(grid)
    assert out.shape == (1, grid[0] * grid[1], 16)
    assert torch.isfinite(out).all()
    distances = torch.cdist(out[0].detach(), out[0].detach()) + torch.eye(grid[0] * grid[1])
    assert distances.min() > 1e-5  # every position gets its own vector
    full = enc.with_prefix(grid)
    assert full.shape == (1, 1 + grid[0] * grid[1], 16)


def test_sincos2d_layout_hand_values():
    # D = 8: channels 0..3 encode x at freqs 1, 1/100; channels 4..7 encode y the same way
    table = sincos_2d((2, 3), 8)
    x, y = 2.0, 1.0  # token index 5 = row 1, column 2
    expected = [
        math.sin(x),
        math.cos(x),
        math.sin(x / 100),
        math.cos(x / 100),
        math.sin(y),
        math.cos(y),
        math.sin(y / 100),
        math.cos(y / 100),
    ]
    assert torch.allclose(table[5], torch.tensor(expected, dtype=torch.float64))
    # token 0 is the origin: sin 0 = 0, cos 0 = 1 on every frequency
    assert torch.equal(table[0], torch.tensor([0.0, 1.0] * 4, dtype=torch.float64))


def test_sincos1d_is_vaswani_over_row_major_index():
    table = sincos_1d(torch.arange(6), 4)
    pos = 4.0
    expected = [math.sin(pos), math.cos(pos), math.sin(pos / 100), math.cos(pos / 100)]
    assert torch.allclose(table[4], torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("grid", [(4, 5), (7, 3), (14, 14)])
def test_learnable_sincos_equals_sincos2d_at_init(grid):
    fixed, learnable = build("sincos2d"), build("learnable_sincos")
    assert torch.allclose(fixed(grid), learnable(grid), atol=1e-6)


def test_learned_resampling_is_identity_at_native_grid():
    enc = build("learned")
    assert enc(CTX.grid) is enc.table
    assert torch.equal(resample_table(enc.table, (4, 5), (4, 5)), enc.table)


def test_learned_resampling_is_bicubic_and_follows_the_table():
    enc = build("learned")
    out = enc((8, 10))
    ref = (
        torch.nn.functional.interpolate(
            enc.table.detach().transpose(1, 2).reshape(1, 16, 4, 5), size=(8, 10), mode="bicubic", align_corners=False
        )
        .flatten(2)
        .transpose(1, 2)
    )
    assert torch.allclose(out, ref, atol=1e-6)
    with torch.no_grad():
        first = enc((8, 10))
        enc.table.add_(1.0)  # in place, as an optimiser step or load_state_dict: nothing stale is served
        assert torch.allclose(enc((8, 10)), first + 1.0, atol=1e-5)


@pytest.mark.parametrize("name", ["learnable_sincos", "fourier"])
def test_computed_encodings_follow_their_parameters(name):
    enc = build(name)
    assert enc((3, 4)).requires_grad  # in the graph, from the parameters
    with torch.no_grad():
        first = enc((3, 4))
        next(enc.parameters()).mul_(1.5)  # in place: the next call sees the update
        assert not torch.allclose(enc((3, 4)), first)


@pytest.mark.parametrize("name", ["sincos1d", "sincos2d"])
def test_fixed_tables_follow_the_module_dtype_and_are_computed_in_float64(name):
    enc = build(name)
    reference = enc.float64_table((3, 4))
    assert reference.dtype == torch.float64 and enc((3, 4)).dtype == torch.float32
    assert torch.equal(enc((3, 4))[0], reference.float())
    assert torch.equal(enc.double()((3, 4))[0], reference)
    assert enc.half()((3, 4)).dtype == torch.float16


def test_learned_init_and_prefix_vector():
    ctx = SlotContext(embed_dim=64, num_heads=2, depth=2, grid=(32, 32), num_prefix_tokens=1)
    enc = build("learned", ctx)
    assert abs(enc.table.std().item() - 0.02) < 0.002
    assert enc.prefix().shape == (1, 1, 64)
    wide = build("learned:std=1", ctx)
    # N(0, 1) truncated at +-2: std 0.880
    assert abs(wide.table.std().item() - 0.880) < 0.02 and wide.table.abs().max() <= 2.0
    assert abs(wide.prefix().std().item() - 0.880) < 0.25
    with pytest.raises(ValueError, match="std"):
        build("learned:std=-1")
    with pytest.raises(ValueError, match="unknown option 'scale'"):
        build("learned:scale=2")


def test_fixed_encodings_prefix_rows_are_zero():
    full = build("sincos2d").with_prefix((3, 3))
    assert torch.equal(full[0, 0], torch.zeros(16))


@pytest.mark.parametrize("name", ["learned", "learnable_sincos", "fourier"])
def test_gradients_reach_every_position_parameter(name):
    enc = build(name)
    out = enc.with_prefix((6, 3))
    (out * torch.randn_like(out)).sum().backward()  # not sum(out**2): sin^2 + cos^2 is constant
    params = list(enc.named_parameters())
    assert params
    for pname, p in params:
        if pname == "prefix_table" and name != "learned":
            continue
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_fourier_formula_and_init():
    ctx = SlotContext(embed_dim=32, num_heads=2, depth=2, grid=(4, 4), num_prefix_tokens=0)
    enc = FourierPosition(ctx, gamma=4.0, dim=4096, hidden=8)
    assert abs(enc.wr.weight.std().item() - 0.25) < 0.02  # variance gamma^-2 -> std 1/gamma
    coords = torch.tensor([[2.0, 3.0]])
    proj = coords @ enc.wr.weight.t()
    ref = torch.cat([proj.cos(), proj.sin()], dim=-1) / 64.0
    assert torch.allclose(enc.features((4, 4))[14], ref[0], atol=1e-6)  # cell (row 3, col 2)
    # unit norm features; inner product approximates a Gaussian kernel of the offset
    r = enc.features((4, 4))
    assert torch.allclose(r.norm(dim=-1), torch.full((16,), 1 / math.sqrt(2)), atol=1e-5)
    code = FourierPosition(ctx, gamma=4.0, dim=4096, init="std")
    assert abs(code.wr.weight.std().item() - 1 / 16) < 0.01


def test_fourier_options_from_string():
    enc = build("fourier:gamma=2:dim=8:hidden=4")
    assert enc.gamma == 2.0 and enc.fourier_dim == 8 and enc.mlp[0].out_features == 4
    with pytest.raises(ValueError, match="unknown option 'width'"):
        build("fourier:width=3")
