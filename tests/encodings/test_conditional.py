"""The conditional slot and PEG: placement strings, F variants, padding, freezing, equivariance."""

import random

import pytest
import torch

import vitpos
from vitpos import PositionConfig, SlotSpec, SpecError
from vitpos.encodings.base import SlotContext
from vitpos.encodings.conditional import format_positions, parse_positions
from vitpos.encodings.peg import PEG, ConditionalPEG, PegForm
from vitpos.registry import CONDITIONAL

from ..conftest import TINY

DIM = 8
FORMS = {
    "dw": PegForm(),
    "dw k=5": PegForm(kernel=5),
    "dense": PegForm(conv="dense"),
    "dw*2": PegForm(stacked=2),
    "dense*2": PegForm(conv="dense", stacked=2),
}


def build(text: str, depth: int = 12, dim: int = DIM) -> ConditionalPEG:
    spec = SlotSpec.parse(text)
    CONDITIONAL.get(spec.name).validate(spec)
    ctx = SlotContext(embed_dim=dim, num_heads=2, depth=depth, grid=(4, 5), num_prefix_tokens=1)
    return CONDITIONAL.get(spec.name).from_spec(spec, ctx)


def trainable(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def as_map(x: torch.Tensor, grid, prefix: int = 0) -> torch.Tensor:  # B, H, W, C
    return x[:, prefix:].reshape(x.shape[0], *grid, x.shape[-1])


def as_tokens(fmap: torch.Tensor) -> torch.Tensor:
    return fmap.flatten(1, 2)


# --- placement ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,positions",
    [
        ("0", (0,)),
        ("-1", (-1,)),
        ("0-1", (0,)),
        ("0-5", (0, 1, 2, 3, 4)),
        ("0-12", tuple(range(12))),
        ("-1-2", (-1, 0, 1)),
        ("-1,3,6-8", (-1, 3, 6, 7)),
        ("6-8,-1", (-1, 6, 7)),
    ],
)
def test_placement_parses_paper_notation(text, positions):
    assert parse_positions(text) == positions


@pytest.mark.parametrize("text", ["0", "-1", "0-5", "-1-2", "-1,3,6-8", "0,2,4", "0-12"])
def test_canonical_placement_round_trips(text):
    assert format_positions(parse_positions(text)) == text


def test_any_position_set_round_trips():
    rng = random.Random(0)
    for _ in range(50):
        positions = tuple(sorted(rng.sample(range(-1, 24), rng.randint(1, 10))))
        assert parse_positions(format_positions(positions)) == positions


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("a", r"cannot read position 'a'"),
        ("0-", r"cannot read position '0-'"),
        ("1.5", r"cannot read position"),
        ("0,", r"cannot read position ''"),
        ("3-3", r"empty range '3-3'.*j must be greater than i"),
        ("5-2", r"empty range"),
        ("-2", r"position -2 .* positions start at -1"),
        ("0,0-2", r"position 0 appears twice"),
    ],
)
def test_bad_placements_are_clear_errors(text, pattern):
    with pytest.raises(SpecError, match=pattern):
        parse_positions(text)


# --- slot strings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,positions,form",
    [
        ("peg", (0,), PegForm()),
        ("peg@0-5", (0, 1, 2, 3, 4), PegForm()),
        ("peg@-1:k=27", (-1,), PegForm(kernel=27)),
        ("peg@0:dense", (0,), PegForm(conv="dense")),
        ("peg@0:dw*4", (0,), PegForm(stacked=4)),
        ("peg@0:dense*4:k=5", (0,), PegForm(conv="dense", stacked=4, kernel=5)),
        ("peg@0:dw*1", (0,), PegForm(stacked=1)),
        ("peg@0:frozen", (0,), PegForm(frozen=True)),
        ("peg@0-5:pad=circular", (0, 1, 2, 3, 4), PegForm(pad="circular")),
        ("peg@0:frozen:k=7:pad=replicate", (0,), PegForm(kernel=7, pad="replicate", frozen=True)),
    ],
)
def test_slot_strings_build_and_round_trip(text, positions, form):
    assert PositionConfig(absolute="none", conditional=text).conditional == text
    assert str(SlotSpec.parse(text)) == text
    peg = build(text)
    assert peg.positions == positions and peg.form == form
    assert sorted(peg.generators, key=int) == [str(p) for p in positions]  # one module per position


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("peg@0:k=4", r"k='4' is invalid .*odd"),
        ("peg@0:k=0", r"k='0' is invalid"),
        ("peg@0:k=x", r"k='x' is invalid"),
        ("peg@0:pad=mirror", r"pad='mirror' is invalid .*zeros, circular, replicate, reflect"),
        ("peg@0:dw*0", r"'dw\*0' stacks no layer"),
        ("peg@0:conv", r"unknown flag 'conv'; valid flags: dw, dense, dw\*N, dense\*N .*frozen"),
        ("peg@0:dw:dense", r"choose one form of F, got dw, dense"),
        ("peg@0:size=3", r"unknown option 'size'; valid options: k, pad"),
        ("peg@0-0", r"empty range"),
        ("peg@-3", r"positions start at -1"),
        ("peg@x", r"cannot read position 'x'"),
    ],
)
def test_bad_peg_strings_are_clear_errors(text, pattern):
    with pytest.raises(SpecError, match=pattern):
        PositionConfig(conditional=text)


def test_positions_past_the_last_block_are_rejected_at_build():
    build("peg@11", depth=12)  # after the last block: allowed
    with pytest.raises(ValueError, match=r"position\(s\) 12 do not exist in a model of depth 12.*-1 .* to 11"):
        build("peg@12", depth=12)
    with pytest.raises(ValueError, match=r"position\(s\) 2, 3, 4 do not exist in a model of depth 2"):
        vitpos.create_model("vit_lite_7_4", **TINY, conditional="peg@0-5")


# --- parameter counts --------------------------------------------------------------------


def test_default_peg_adds_k2_plus_one_times_width():
    # Table 8: PEG at position 0 of CPVT-Ti has 1,920 positional parameters = (9 + 1) * 192
    assert trainable(build("peg@0", dim=192)) == (9 + 1) * 192 == 1920
    assert trainable(build("peg@0-5", dim=192)) == 5 * 1920
    assert trainable(build("peg@-1:k=27", dim=192)) == (27 * 27 + 1) * 192  # Table 6 right: +0.14M


@pytest.mark.parametrize("k", [1, 3, 7])
def test_parameter_count_of_every_form(k):
    d, n = DIM, 3
    conv_dw, conv_dense, bn = (k * k + 1) * d, (k * k * d + 1) * d, 2 * d
    assert trainable(PEG(d, PegForm(kernel=k))) == conv_dw
    assert trainable(PEG(d, PegForm(conv="dense", kernel=k))) == conv_dense
    assert trainable(PEG(d, PegForm(stacked=n, kernel=k))) == n * (conv_dw + bn)
    assert trainable(PEG(d, PegForm(conv="dense", stacked=n, kernel=k))) == n * (conv_dense + bn)


# --- the PEG computation -----------------------------------------------------------------


def _source_index(i: int, size: int, pad: str) -> int | None:
    if 0 <= i < size:
        return i
    if pad == "zeros":
        return None
    if pad == "circular":
        return i % size
    if pad == "replicate":
        return min(max(i, 0), size - 1)
    return -i if i < 0 else 2 * (size - 1) - i  # reflect


@torch.no_grad()
def reference_peg(x, conv: torch.nn.Conv2d, grid, prefix: int, pad: str) -> torch.Tensor:
    """Alg. 1 of the paper with the convolution written as an explicit neighbourhood sum."""
    h, w = grid
    fmap = as_map(x, grid, prefix)
    r = conv.kernel_size[0] // 2
    out = fmap + conv.bias
    for i in range(h):
        for j in range(w):
            for a in range(-r, r + 1):
                for b in range(-r, r + 1):
                    si, sj = _source_index(i + a, h, pad), _source_index(j + b, w, pad)
                    if si is None or sj is None:
                        continue
                    tap = conv.weight[:, :, a + r, b + r]
                    src = fmap[:, si, sj]
                    out[:, i, j] += src * tap[:, 0] if conv.groups > 1 else src @ tap.t()
    return torch.cat([x[:, :prefix], as_tokens(out)], dim=1)


@pytest.mark.parametrize("conv", ["dw", "dense"])
@pytest.mark.parametrize("pad", ["zeros", "circular", "replicate", "reflect"])
@pytest.mark.parametrize("prefix", [0, 2])
def test_equals_slow_reference(conv, pad, prefix):
    grid = (4, 6)
    peg = PEG(DIM, PegForm(conv=conv, kernel=3, pad=pad)).double()
    x = torch.randn(3, prefix + 24, DIM, dtype=torch.float64)
    expected = reference_peg(x, peg.proj[0], grid, prefix, pad)
    assert torch.allclose(peg(x, grid, prefix), expected, atol=1e-12)


@pytest.mark.parametrize("name", FORMS)
@pytest.mark.parametrize("grid", [(1, 1), (2, 7), (5, 3), (14, 14)])
@pytest.mark.parametrize("prefix,batch", [(0, 1), (1, 2), (3, 3)])
def test_shapes_at_any_grid_and_prefix_untouched(name, grid, prefix, batch):
    # BatchNorm cannot train on a single value per channel (batch 1 on a 1x1 grid)
    peg = PEG(DIM, FORMS[name]).train(batch * grid[0] * grid[1] > 1)
    x = torch.randn(batch, prefix + grid[0] * grid[1], DIM)
    out = peg(x, grid, prefix)
    assert out.shape == x.shape and torch.isfinite(out).all()
    assert torch.equal(out[:, :prefix], x[:, :prefix])


def test_wrong_grid_and_too_small_grid_are_clear_errors():
    peg = PEG(DIM)
    with pytest.raises(ValueError, match="20 tokens do not fill a 4x6 grid"):
        peg(torch.randn(1, 21, DIM), (4, 6), 1)
    wide = PEG(DIM, PegForm(kernel=7, pad="reflect"))
    with pytest.raises(ValueError, match=r"k=7 and pad=reflect needs a grid side of at least 4, got grid \(3, 8\)"):
        wide(torch.randn(1, 24, DIM), (3, 8), 0)
    PEG(DIM, PegForm(kernel=7, pad="circular"))(torch.randn(1, 24, DIM), (3, 8), 0)  # wraps once: fine


def test_gradients_reach_every_peg_parameter_and_the_input():
    peg = PEG(DIM, PegForm(stacked=2))
    x = torch.randn(2, 1 + 12, DIM, requires_grad=True)
    peg(x, (3, 4), 1).square().sum().backward()
    for name, p in peg.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert torch.equal(x.grad[:, 0], 2 * x[:, 0].detach())  # the class token is the identity


# --- translation: equivariance and absolute position ---------------------------------------


def _roll(x, grid, shift, prefix=0):
    rolled = as_tokens(torch.roll(as_map(x, grid, prefix), shift, dims=(1, 2)))
    return torch.cat([x[:, :prefix], rolled], dim=1)


@pytest.mark.parametrize("name", FORMS)
def test_circular_padding_is_exactly_shift_equivariant(name):
    form = PegForm(FORMS[name].conv, FORMS[name].stacked, FORMS[name].kernel, pad="circular")
    peg = PEG(DIM, form).double().eval()
    grid, rng = (5, 7), random.Random(1)
    x = torch.randn(2, 1 + 35, DIM, dtype=torch.float64)
    for _ in range(4):
        shift = (rng.randrange(5), rng.randrange(7))
        assert torch.allclose(
            peg(_roll(x, grid, shift, 1), grid, 1), _roll(peg(x, grid, 1), grid, shift, 1), atol=1e-12
        )


@pytest.mark.parametrize("name", FORMS)
def test_zero_padding_output_on_interior_tokens_shifts_with_the_input(name):
    peg = PEG(DIM, FORMS[name]).double().eval()
    reach = max(FORMS[name].stacked, 1) * (FORMS[name].kernel // 2)  # receptive radius of F
    grid, (dy, dx) = (9, 11), (1, 2)
    x = torch.randn(2, 99, DIM, dtype=torch.float64)
    shifted_map = torch.randn(2, *grid, DIM, dtype=torch.float64)  # whatever enters at the edge
    shifted_map[:, dy:, dx:] = as_map(x, grid)[:, : grid[0] - dy, : grid[1] - dx]
    out, out_shifted = as_map(peg(x, grid, 0), grid), as_map(peg(as_tokens(shifted_map), grid, 0), grid)
    # cells whose window, and whose source cell's window, lie inside the grid
    rows, cols = slice(dy + reach, grid[0] - reach), slice(dx + reach, grid[1] - reach)
    src_rows, src_cols = slice(reach, grid[0] - reach - dy), slice(reach, grid[1] - reach - dx)
    assert rows.stop > rows.start and cols.stop > cols.start
    assert torch.allclose(out_shifted[:, rows, cols], out[:, src_rows, src_cols], atol=1e-12)


def test_zero_padding_tells_border_tokens_apart():
    # the same content everywhere: any difference between output tokens is position information
    grid = (5, 6)
    x = torch.randn(1, 1, DIM).expand(1, 30, DIM)
    zero = as_map(PEG(DIM)(x, grid, 0), grid)[0]
    corner, edge, inside = zero[0, 0], zero[0, 3], zero[2, 3]
    assert not torch.allclose(corner, edge) and not torch.allclose(edge, inside)
    assert torch.allclose(zero[1:-1, 1:-1], inside.expand_as(zero[1:-1, 1:-1]), atol=1e-6)  # interior alike
    circular = as_map(PEG(DIM, PegForm(pad="circular"))(x, grid, 0), grid)[0]
    assert torch.allclose(circular, circular[0, 0].expand_as(circular), atol=1e-6)  # nowhere special


def test_zero_padding_distinguishes_shifted_inputs_at_the_border():
    peg = PEG(DIM).double()
    grid, shift = (4, 5), (1, 2)
    x = torch.randn(2, 1 + 20, DIM, dtype=torch.float64)
    moved, expected = peg(_roll(x, grid, shift, 1), grid, 1), _roll(peg(x, grid, 1), grid, shift, 1)
    border = torch.ones(grid, dtype=torch.bool)
    border[1:-1, 1:-1] = False
    differs = (as_map(moved, grid, 1) - as_map(expected, grid, 1)).abs().amax(dim=(0, 3)) > 1e-6
    assert differs[border].all()  # every border token sees a different position than before


# --- frozen PEG (Table 5) ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["peg@0:frozen", "peg@0-5:dw*2:frozen", "peg@0:dense:frozen"])
def test_frozen_peg_has_no_trainable_parameters(text):
    peg = build(text)
    assert trainable(peg) == 0 and sum(p.numel() for p in peg.parameters()) > 0


def test_frozen_peg_stays_fixed_through_training():
    model = vitpos.create_model("vit_lite_7_4", **TINY, absolute="none", conditional="peg@0:dw*2:frozen")
    before = {k: v.clone() for k, v in model.stages[0].conditional.state_dict().items()}
    qkv_before = model.stages[0].blocks[0].attn.qkv.weight.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model.train()
    assert not any(
        m.training for peg in model.stages[0].conditional.generators.values() for m in peg.modules()
    )  # BatchNorm stats too
    model(torch.randn(4, 3, 32, 32)).logsumexp(-1).sum().backward()
    optimizer.step()
    after = model.stages[0].conditional.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(model.stages[0].blocks[0].attn.qkv.weight, qkv_before)  # the rest of the model did train


def test_frozen_peg_loads_learned_weights():
    # Table 5 "fixed (learned init)": a trained PEG's weights load into a frozen one
    learned = vitpos.create_model("vit_lite_7_4", **TINY, absolute="none", conditional="peg@0").eval()
    frozen = vitpos.create_model("vit_lite_7_4", **TINY, absolute="none", conditional="peg@0:frozen").eval()
    frozen.load_state_dict(learned.state_dict())
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(frozen(x), learned(x))
    assert trainable(frozen.stages[0].conditional) == 0
