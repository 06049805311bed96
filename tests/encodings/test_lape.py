"""LaPE: Eq. 8-9 by hand, Table 5's forms, Table 6's eta, parameter counts, eval against training
and LaPE for relative biases."""

import pytest
import torch
from torch import nn

import vitpos
from vitpos.analysis.attention import explicit_attention
from vitpos.encodings.base import SlotContext
from vitpos.encodings.lape import FORMS, LapeJoin, NormalisedBias
from vitpos.encodings.relative.base import RelativeBias, RelativePosition
from vitpos.grid import grid_offsets
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from ..conftest import TINY
from .test_join import DEEP, record, tokens

CTX = SlotContext(embed_dim=16, num_heads=2, depth=3, grid=(4, 5), num_prefix_tokens=1)


def layer_norm_by_hand(x, weight=1.0, bias=0.0, eps=1e-6):
    """(x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the last axis (LaPE Eq. 1)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def randomise(module: nn.Module) -> None:
    """Move every parameter of ``module`` off its initial value, so identities cannot pass by accident."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.5)


def build_join(text: str, ctx: SlotContext = CTX) -> LapeJoin:
    spec = SlotSpec.parse(text)
    LapeJoin.validate(spec)
    return LapeJoin.from_spec(spec, ctx, has_absolute=True)


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- parameter counts


@pytest.mark.parametrize(
    "join,extra",
    [
        ("lape", 2 * 192 * 12),  # the paper's 4.6k for DeiT-Ti
        ("lape:eta=3", 2 * 192 * 3),
        ("lape:chained", 2 * 192 * 12),
        ("lape:form=identity", 0),
        ("lape:form=scalar", 12),
        ("lape:form=channel", 192 * 12),
        ("lape:form=affine", 2 * 192 * 12),
        ("lape:form=norm", 0),
        ("lape:form=scalar_norm", 12),
        ("lape:form=channel_norm", 192 * 12),
        ("lape:form=ln", 2 * 192 * 12),
    ],
)
def test_lape_parameter_count_on_deit_tiny(join, extra):
    with torch.device("meta"):
        base = vitpos.create_model("deit_tiny_patch16_224")
        lape = vitpos.create_model("deit_tiny_patch16_224", join=join)
    assert count(base) == 5_717_416
    assert count(lape) - count(base) == extra


@pytest.mark.parametrize(
    "name,expected",
    [
        ("deit_tiny_patch16_224_lape", 5_717_416 + 2 * 192 * 12),
        ("deit_small_patch16_224_lape", 22_050_664 + 2 * 384 * 12),
        ("vit_lite_7_4_lape", 3_722_250 + 2 * 256 * 7),
    ],
)
def test_lape_presets(name, expected):
    cfg = vitpos.get_config(name)
    assert cfg.position.join == "lape" and cfg.position.absolute == "learned"
    with torch.device("meta"):
        model = vitpos.create_model(name)
    assert count(model) == expected


# ---------------------------------------------------------------- Eq. 8-9 by hand


@pytest.mark.parametrize("absolute", ["learned", "sincos2d", "fourier"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_attention_input_is_ln_x_plus_ln_pe_and_tokens_enter_bare(absolute, mode):
    model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute=absolute, join="lape:eta=2")
    randomise(model.stages[0].join)
    model.train(mode == "train")
    images = torch.randn(2, 3, 24, 40)
    with torch.set_grad_enabled(mode == "train"):
        seen = record(model, images)
        pe = model.stages[0].position_encoding((3, 5))
    gamma, beta = model.stages[0].join.pe_norm.weight, model.stages[0].join.pe_norm.bias
    # Eq. 8: block 0 sees the bare tokens; the residual stream carries x only
    assert torch.equal(seen["block_in"][0], tokens(model, images))
    for i in (1, 2):
        assert torch.equal(seen["block_in"][i], seen["block_out"][i - 1])
    # Eq. 9 for the first eta = 2 blocks; block 2 gets no position term at all
    for i, block in enumerate(model.stages[0].blocks):
        x = seen["block_in"][i]
        expected = layer_norm_by_hand(x, block.norm1.weight, block.norm1.bias)
        if i < 2:
            expected = expected + layer_norm_by_hand(pe, gamma[i], beta[i])
        assert torch.allclose(seen["attn_in"][i], expected, atol=1e-5), i


def test_prefix_rows_learned_are_normalised_and_zero_rows_receive_beta():
    for absolute in ("sincos2d", "learned"):
        model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute=absolute, join="lape")
        randomise(model.stages[0].join)
        pe = model.stages[0].position_encoding((4, 4))
        out = model.stages[0].join.layer_encodings(pe)
        beta = model.stages[0].join.pe_norm.bias
        for layer in range(3):
            if absolute == "sincos2d":
                assert torch.equal(pe[0, 0], torch.zeros(32))
                assert torch.allclose(out[layer, 0, 0], beta[layer])
            else:
                row = layer_norm_by_hand(pe[0, 0], model.stages[0].join.pe_norm.weight[layer], beta[layer])
                assert torch.allclose(out[layer, 0, 0], row, atol=1e-5)


def test_chained_lape_normalises_the_previous_layers_output():
    join = build_join("lape:chained")
    randomise(join)
    pe = torch.randn(1, 21, 16) * 3
    current, expected = pe, []
    for layer in range(3):
        current = layer_norm_by_hand(current, join.pe_norm.weight[layer], join.pe_norm.bias[layer])
        expected.append(current)
    assert torch.allclose(join.layer_encodings(pe), torch.stack(expected), atol=1e-5)
    plain = build_join("lape")
    plain.load_state_dict(join.state_dict())
    assert not torch.allclose(plain.layer_encodings(pe)[1:], torch.stack(expected)[1:], atol=1e-3)


FORM_BY_HAND = {
    "identity": lambda pe, g, b: pe,
    "scalar": lambda pe, g, b: g * pe,
    "channel": lambda pe, g, b: g * pe,
    "affine": lambda pe, g, b: g * pe + b,
    "norm": lambda pe, g, b: layer_norm_by_hand(pe),
    "scalar_norm": lambda pe, g, b: g * layer_norm_by_hand(pe),
    "channel_norm": lambda pe, g, b: g * layer_norm_by_hand(pe),
    "ln": lambda pe, g, b: g * layer_norm_by_hand(pe) + b,
}
GAMMA_SHAPE = {
    "scalar": (3, 1),
    "scalar_norm": (3, 1),
    "channel": (3, 16),
    "channel_norm": (3, 16),
    "affine": (3, 16),
    "ln": (3, 16),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_table5_forms_by_hand(form):
    assert set(FORM_BY_HAND) == set(FORMS)
    join = build_join(f"lape:form={form}")
    randomise(join)
    norm = join.pe_norm
    assert (None if norm.weight is None else tuple(norm.weight.shape)) == GAMMA_SHAPE.get(form)
    assert (norm.bias is not None) == (form in ("affine", "ln"))
    pe = torch.randn(1, 21, 16) * 2 + 1
    out = join.layer_encodings(pe)
    assert out.shape == (3, 1, 21, 16)
    for layer in range(3):
        g = 1.0 if norm.weight is None else norm.weight[layer]
        b = 0.0 if norm.bias is None else norm.bias[layer]
        assert torch.allclose(out[layer], FORM_BY_HAND[form](pe, g, b), atol=1e-5), layer


def test_gradients_reach_every_layer_of_the_pe_norm_and_the_table():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, join="lape:chained")
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    for p in (model.stages[0].join.pe_norm.weight, model.stages[0].join.pe_norm.bias):
        assert (p.grad.abs().sum(-1) > 0).all()
    assert model.stages[0].absolute.table.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "overrides,pattern",
    [
        (dict(join="lape:eta=4"), r"lape: eta=4 must be between 1 and the model depth 3"),
        (
            dict(join="lape", absolute="none"),
            r"join 'lape' has nothing to normalise with absolute='none' and relative='none'",
        ),
    ],
)
def test_invalid_lape_models_raise_clear_errors(overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        vitpos.create_model("vit_lite_7_4", **DEEP, **overrides)


# ---------------------------------------------------------------- eval, training, other grids and dtypes


def lape_model(**overrides) -> nn.Module:
    model = vitpos.create_model("vit_lite_7_4", **{**DEEP, "join": "lape", **overrides})
    randomise(model.stages[0].join)
    return model


def test_eval_equals_training_and_follows_every_parameter_update():
    model = lape_model().eval()
    join = model.stages[0].join
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        first = model(images)
        model.train()  # same weights, no dropout
        assert torch.equal(model(images), first)
        model.eval()
        for param in (join.pe_norm.weight, model.stages[0].absolute.table, model.stages[0].absolute.prefix_table):
            param.mul_(1.5)  # in place, as an optimiser or load_state_dict would
            updated = model(images)
            assert not torch.allclose(updated, first)
            pe = model.stages[0].position_encoding((4, 4))
            assert torch.equal(join.additions(pe, (4, 4)).attention[1], join.layer_encodings(pe)[1])
            first = updated


def test_other_grids_and_dtypes():
    model = lape_model(absolute="sincos2d").eval()
    join = model.stages[0].join
    with torch.no_grad():
        small = join.layer_encodings(model.stages[0].position_encoding((4, 4)))
        wide = join.layer_encodings(model.stages[0].position_encoding((3, 5)))
        assert small.shape == (3, 1, 17, 32) and wide.shape == (3, 1, 16, 32)
        model.double()
        doubled = join.layer_encodings(model.stages[0].position_encoding((4, 4)))
        assert doubled.dtype == torch.float64 and torch.allclose(doubled.float(), small, atol=1e-5)
        assert model(torch.randn(1, 3, 24, 40, dtype=torch.float64)).dtype == torch.float64


def test_lape_without_an_absolute_encoding_owns_no_pe_norm():
    join = LapeJoin.from_spec(SlotSpec.parse("lape"), CTX, has_absolute=False)
    assert join.pe_norm is None and not list(join.parameters())
    assert join.additions(None, (4, 5)).attention == ()
    with pytest.raises(ValueError, match="built without an absolute encoding"):
        join.layer_encodings(torch.randn(1, 21, 16))


# ---------------------------------------------------------------- LaPE for relative biases


class ClippedBias(RelativeBias):
    """A stand-in bias-type relative encoding: a learned per-head table over offsets clipped to
    +-2 in each direction, and one learned scalar per head for every prefix row and column."""

    def __init__(self, ctx: SlotContext, clip: int = 2) -> None:
        super().__init__()
        self.clip = clip
        self.table = nn.Parameter(torch.randn(ctx.num_heads, 2 * clip + 1, 2 * clip + 1))
        self.prefix = nn.Parameter(torch.randn(ctx.num_heads))

    @classmethod
    def build(cls, ctx, options, layer=0):
        return cls(ctx)

    def position_bias(self, grid, num_prefix_tokens):
        offsets = grid_offsets(grid).clamp(-self.clip, self.clip) + self.clip
        patches = self.table[:, offsets[..., 0], offsets[..., 1]]  # heads, H*W, H*W
        p, n = num_prefix_tokens, patches.shape[-1] + num_prefix_tokens
        full = self.prefix[:, None, None].expand(-1, n, n)
        return torch.cat([full[:, :p], torch.cat([full[:, p:, :p], patches], dim=-1)], dim=1)


class RotateOnly(RelativePosition):
    """A stand-in relative encoding that is not a plain bias."""

    @classmethod
    def build(cls, ctx, options, layer=0):
        return cls()


@pytest.fixture
def registered_test_relatives(monkeypatch):
    monkeypatch.setitem(RELATIVE._entries, "test_clipped", ClippedBias)
    monkeypatch.setitem(RELATIVE._entries, "test_rotate", RotateOnly)


@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_normalised_bias_by_hand(prefix):
    ctx = SlotContext(embed_dim=16, num_heads=2, depth=1, grid=(3, 4), num_prefix_tokens=prefix)
    inner = ClippedBias(ctx)
    wrapped = NormalisedBias(inner, "ln", num_heads=2)
    randomise(wrapped.norm)
    bias = inner.position_bias((3, 4), prefix)
    out = wrapped.position_bias((3, 4), prefix)
    assert out.shape == (2, prefix + 12, prefix + 12)
    gamma, beta = wrapped.norm.weight[0], wrapped.norm.bias[0]
    for head in range(2):
        patches = layer_norm_by_hand(bias[head, prefix:, prefix:], gamma[head], beta[head], eps=1e-5)
        assert torch.allclose(out[head, prefix:, prefix:], patches, atol=1e-5)
    assert torch.equal(out[:, :prefix], bias[:, :prefix])  # prefix rows and columns pass through
    assert torch.equal(out[:, :, :prefix], bias[:, :, :prefix])
    # the affine is per head: nothing about it depends on the grid
    assert tuple(wrapped.norm.weight.shape) == (1, 2) and wrapped.position_bias((5, 2), prefix).shape[-1] == prefix + 10


@pytest.mark.usefixtures("registered_test_relatives")
def test_lape_with_only_a_relative_bias_normalises_it_in_the_first_eta_blocks():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute="none", join="lape:eta=2", relative="test_clipped")
    plain = vitpos.create_model("vit_lite_7_4", **DEEP, absolute="none", relative="test_clipped")
    assert count(model) - count(plain) == 2 * 2 * 2  # gamma and beta per head, in 2 blocks
    kinds = [type(block.attn.relative) for block in model.stages[0].blocks]
    assert kinds == [NormalisedBias, NormalisedBias, ClippedBias]
    assert model.stages[0].blocks[0].attn.relative.encoding is not model.stages[0].blocks[1].attn.relative.encoding
    for size in ((32, 32), (24, 40), (8, 8)):
        assert model(torch.randn(2, 3, *size)).shape == (2, 5)


@pytest.mark.usefixtures("registered_test_relatives")
def test_attention_logits_use_the_normalised_bias():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute="learned", join="lape", relative="test_clipped").eval()
    block = model.stages[0].blocks[1]
    randomise(block.attn.relative.norm)
    seen = {}
    block.attn.register_forward_pre_hook(lambda m, args: seen.update(h=args[0]))
    with explicit_attention(model) as weights:
        model(torch.randn(2, 3, 24, 40))
    seen["weights"] = weights[1]
    attn = block.attn
    b, n, _ = seen["h"].shape
    q, k, _ = attn.qkv(seen["h"]).reshape(b, n, 3, 2, 16).permute(2, 0, 3, 1, 4)
    bias = attn.relative.encoding.position_bias((3, 5), 1)
    mean = bias[:, 1:, 1:].mean(-1, keepdim=True)
    var = bias[:, 1:, 1:].var(-1, unbiased=False, keepdim=True)
    gamma, beta = attn.relative.norm.weight[0], attn.relative.norm.bias[0]
    normalised = bias.clone()
    normalised[:, 1:, 1:] = (bias[:, 1:, 1:] - mean) / torch.sqrt(var + 1e-5) * gamma[:, None, None] + beta[
        :, None, None
    ]
    expected = ((q @ k.transpose(-2, -1)) * attn.scale + normalised).softmax(-1)
    assert torch.allclose(seen["weights"], expected, atol=1e-5)


@pytest.mark.usefixtures("registered_test_relatives")
def test_normalised_bias_follows_updates_of_the_wrapped_bias():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute="none", join="lape", relative="test_clipped").eval()
    wrapped = model.stages[0].blocks[0].attn.relative
    with torch.no_grad():
        first = wrapped.position_bias((4, 4), 1)
        assert torch.equal(wrapped.position_bias((4, 4), 1), first)
        wrapped.encoding.table.mul_(2.0)
        wrapped.encoding.table[0, 0, 0] += 1.0  # not a rescaling, which LN would undo
        assert not torch.allclose(wrapped.position_bias((4, 4), 1), first)


@pytest.mark.usefixtures("registered_test_relatives")
def test_lape_needs_something_to_normalise():
    with pytest.raises(ValueError, match=r"block 0's relative encoding \(RotateOnly\) is not a plain bias"):
        vitpos.create_model("vit_lite_7_4", **TINY, absolute="none", join="lape", relative="test_rotate")
    # with an absolute encoding, a non-bias relative encoding simply passes through
    model = vitpos.create_model("vit_lite_7_4", **TINY, join="lape", relative="test_rotate")
    assert all(type(block.attn.relative) is RotateOnly for block in model.stages[0].blocks)
