"""The join slot: every join with every absolute encoding, and the input/shared/unshared rules."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import vitpos
from vitpos import PositionConfig, SlotSpec
from vitpos.encodings.conditional import ConditionalEncoding
from vitpos.grid import resample_table
from vitpos.registry import ABSOLUTE, CONDITIONAL, JOIN

from ..conftest import TINY

DEEP = {**TINY, "depth": 3}
"""Three blocks, so a test sees a middle block as well as the first and last."""

JOIN_STRINGS = [
    "input",
    "shared",
    "unshared",
    "lape",
    "lape:eta=1",
    "lape:chained",
    "lape:form=norm",
    "lape:form=identity",
    "lape:form=scalar",
    "lape:form=channel",
    "lape:form=affine",
    "lape:form=scalar_norm",
    "lape:form=channel_norm",
    "lape:form=ln",
    "lape:chained:eta=2:form=affine",
]
JOINS = ["input", "shared", "unshared", "lape", "lape:chained:eta=1:form=affine"]
"""One of each kind; every form is checked by hand in test_lape.py."""
GRIDS = [(32, 32), (24, 40), (8, 8), (48, 16)]  # 4x4 (native), 3x5, 1x1, 6x2


def invalid_reason(join: str, absolute: str) -> str | None:
    """The error a (join, absolute) pair must raise, as stated by the join's documented rules."""
    name = SlotSpec.parse(join).name
    if name == "unshared" and absolute != "learned":
        return "needs a learned absolute encoding"
    if name == "shared" and absolute == "none":
        return "join 'shared' adds the absolute encoding before every block, but absolute='none'"
    if name == "lape" and absolute == "none":
        return "join 'lape' has nothing to normalise with absolute='none' and relative='none'"
    return None


def record(model: nn.Module, images: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Run ``model`` and capture each block's input and output and each attention's input."""
    seen: dict[str, list[torch.Tensor]] = {"block_in": [], "block_out": [], "attn_in": []}
    hooks = []
    for block in model.stages[0].blocks:
        hooks.append(block.register_forward_pre_hook(lambda m, args: seen["block_in"].append(args[0])))
        hooks.append(block.register_forward_hook(lambda m, args, out: seen["block_out"].append(out)))
        hooks.append(block.attn.register_forward_pre_hook(lambda m, args: seen["attn_in"].append(args[0])))
    try:
        seen["logits"] = [model(images)]
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def tokens(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Patch embeddings with the prefix tokens in front: the bare tokens, before any position signal."""
    x, _ = model.downsamples[0](images)
    return model._prepend_prefix(x)


@pytest.mark.parametrize("join", JOINS)
@pytest.mark.parametrize("absolute", ABSOLUTE.names())
def test_every_join_with_every_absolute_encoding(join, absolute):
    reason = invalid_reason(join, absolute)
    if reason is not None:
        with pytest.raises(ValueError, match=reason):
            PositionConfig(absolute=absolute, join=join)
        return
    for head in ("cls", "gap"):
        model = vitpos.create_model("vit_lite_7_4", **TINY, absolute=absolute, join=join, head=head)
        for size in GRIDS:
            grid = model.stage_grids(size)[-1]
            feats = model.forward_tokens(torch.randn(2, 3, *size))
            assert feats.shape == (2, model.num_prefix_tokens + grid[0] * grid[1], 32)
            assert torch.isfinite(feats).all()


@pytest.mark.parametrize("join", JOIN_STRINGS)
def test_join_strings_parse_and_round_trip(join):
    spec = SlotSpec.parse(join)
    assert str(spec) == join and SlotSpec.parse(str(spec)) == spec
    assert PositionConfig(join=join).join == join
    assert JOIN.get(spec.name) is PositionConfig(join=join).entry("join")


def test_join_strings_normalise_flags_before_options():
    cfg = PositionConfig(join="lape:eta=3:chained")
    assert cfg.join == "lape:chained:eta=3"
    assert SlotSpec.parse(cfg.join) == SlotSpec("lape", None, ("chained",), (("eta", "3"),))


@pytest.mark.parametrize(
    "join,pattern",
    [
        ("input:eta=3", r"unknown option 'eta'; valid options: none"),
        ("shared:chained", r"unknown flag 'chained'; valid flags: none"),
        ("unshared@2", r"takes no '@' placement"),
        ("lape:eta=0", r"eta='0' is invalid \(must be a positive integer\)"),
        ("lape:eta=two", r"eta='two' is invalid"),
        (
            "lape:form=layer",
            r"form='layer' is invalid \(must be one of identity, scalar, channel, affine, norm, "
            r"scalar_norm, channel_norm, ln\)",
        ),
        ("lape:chain", r"unknown flag 'chain'; valid flags: chained"),
        ("lape:k=3", r"unknown option 'k'; valid options: eta, form"),
        ("everywhere", r"unknown join 'everywhere'; valid values: detr, input, lape, shared, unshared"),
    ],
)
def test_bad_join_strings_say_what_is_wrong(join, pattern):
    with pytest.raises(ValueError, match=pattern):
        PositionConfig(join=join)


def test_unshared_error_lists_the_learned_encodings():
    with pytest.raises(ValueError, match=r"needs a learned absolute encoding \(learned\), got absolute='sincos2d'"):
        PositionConfig(absolute="sincos2d", join="unshared")


def test_input_join_adds_pe_once_before_block_zero():
    model = vitpos.create_model("vit_lite_7_4", **DEEP).eval()
    images = torch.randn(2, 3, 32, 32)
    seen = record(model, images)
    pe = model.stages[0].position_encoding((4, 4))
    assert torch.equal(seen["block_in"][0], tokens(model, images) + pe)
    for i in range(1, 3):
        assert torch.equal(seen["block_in"][i], seen["block_out"][i - 1])
        assert torch.equal(seen["attn_in"][i], model.stages[0].blocks[i].norm1(seen["block_in"][i]))


@pytest.mark.parametrize("absolute", ["sincos1d", "learned"])
def test_shared_join_adds_the_same_pe_before_every_block(absolute):
    model = vitpos.create_model("vit_lite_7_4", **DEEP, absolute=absolute, join="shared").eval()
    images = torch.randn(2, 3, 24, 40)
    seen = record(model, images)
    pe = model.stages[0].position_encoding((3, 5))
    assert torch.equal(seen["block_in"][0], tokens(model, images) + pe)
    for i in range(1, 3):
        assert torch.equal(seen["block_in"][i], seen["block_out"][i - 1] + pe)
        assert torch.equal(seen["attn_in"][i], model.stages[0].blocks[i].norm1(seen["block_in"][i]))


def test_unshared_join_adds_a_distinct_table_per_layer():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, join="unshared").eval()
    images = torch.randn(2, 3, 32, 32)
    seen = record(model, images)
    assert torch.equal(seen["block_in"][0], tokens(model, images) + model.stages[0].position_encoding((4, 4)))
    for i in range(1, 3):
        table = model.stages[0].join.tables[i - 1 : i]
        assert torch.equal(seen["block_in"][i], seen["block_out"][i - 1] + table)
    assert not torch.equal(model.stages[0].join.tables[0], model.stages[0].join.tables[1])


@pytest.mark.parametrize(
    "model_name,extra", [("deit_tiny_patch16_224", 11 * 197 * 192), ("vit_lite_7_4", 6 * 65 * 256)]
)
def test_unshared_parameter_count_is_one_table_per_further_layer(model_name, extra):
    with torch.device("meta"):
        base = vitpos.create_model(model_name)
        unshared = vitpos.create_model(model_name, join="unshared")
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(unshared) - count(base) == extra


def test_unshared_tables_resample_like_the_learned_encoding_and_are_cached_in_inference():
    model = vitpos.create_model("vit_lite_7_4", **DEEP, join="unshared").eval()
    join = model.stages[0].join
    assert join.layer_table(2, (6, 2)).requires_grad  # autograd records: computed in the graph
    with torch.no_grad():
        table = join.layer_table(2, (6, 2))
        assert join.layer_tables((6, 2)) is join.layer_tables((6, 2))  # one resampling per grid
        for index in (1, 2):  # resampled together, each as on its own
            alone = join.tables[index - 1 : index].clone()
            cells = resample_table(alone[:, 1:], (4, 4), (6, 2))
            assert torch.equal(join.layer_table(index, (6, 2)), torch.cat([alone[:, :1], cells], dim=1))
        cells = join.tables[1:2, 1:].transpose(1, 2).reshape(1, 32, 4, 4)
        reference = F.interpolate(cells, size=(6, 2), mode="bicubic", align_corners=False).flatten(2).transpose(1, 2)
        assert torch.allclose(table[:, 1:], reference, atol=1e-6)
        assert torch.equal(table[:, :1], join.tables[1:2, :1])  # prefix row kept
        join.tables.add_(1.0)  # an in-place update (optimiser step, load_state_dict) is seen at once
        assert torch.equal(join.layer_table(2, (6, 2))[:, :1], table[:, :1] + 1.0)
    with pytest.raises(IndexError, match="block 0 has no own table"):
        join.layer_table(0, (4, 4))


@pytest.mark.parametrize("join", JOINS)
def test_join_terms_are_a_pure_function_of_pe_and_grid(join):
    """The same (pe, grid) gives equal terms whatever was computed before, and a forward pass leaves
    no state behind: the join's attributes are the same before and after."""
    model = vitpos.create_model("vit_lite_7_4", **DEEP, join=join).eval()
    randomise_parameters(model)
    before = dict(vars(model.stages[0].join))
    with torch.no_grad():
        pe = model.stages[0].position_encoding((3, 5))
        first = model.stages[0].join.additions(pe, (3, 5))
        model(torch.randn(2, 3, 32, 32))
        model.stages[0].join.additions(model.stages[0].position_encoding((4, 4)), (4, 4))
        again = model.stages[0].join.additions(pe, (3, 5))
    assert dict(vars(model.stages[0].join)) == before
    for name in ("residual", "attention"):
        mine, theirs = getattr(first, name), getattr(again, name)
        assert len(mine) == len(theirs) <= 3
        for a, b in zip(mine, theirs, strict=True):
            assert (a is None and b is None) or torch.equal(a, b)
    assert (first.entry is None and again.entry is None) or torch.equal(first.entry, again.entry)


def test_join_terms_per_join():
    """What each join's terms hold: input -> entry; shared -> pe before every block; unshared -> pe
    then the own tables; lape -> normalised pe in every attention input."""
    for join, entry, residual, attention in [
        ("input", True, 0, 0),
        ("shared", False, 3, 0),
        ("unshared", False, 3, 0),
        ("lape", False, 0, 3),
        ("lape:eta=2", False, 0, 2),
    ]:
        model = vitpos.create_model("vit_lite_7_4", **DEEP, join=join)
        pe = model.stages[0].position_encoding((4, 4))
        terms = model.stages[0].join.additions(pe, (4, 4))
        assert (terms.entry is pe) == entry and (terms.entry is None) != entry
        assert len(terms.residual) == residual and len(terms.attention) == attention
        assert terms.residual_at(3) is None and terms.attention_at(3) is None
        if join == "shared":
            assert all(t is pe for t in terms.residual)
        if join == "unshared":
            assert terms.residual[0] is pe and torch.equal(terms.residual[2], model.stages[0].join.tables[1:2])
        assert model.stages[0].join.additions(None, (4, 4)).entry is None


def randomise_parameters(model: nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)


@pytest.mark.parametrize("join", ["shared", "unshared", "lape"])
def test_gradients_reach_join_and_absolute_parameters_off_the_native_grid(join):
    model = vitpos.create_model("vit_lite_7_4", **DEEP, join=join)
    model(torch.randn(2, 3, 40, 24)).sum().backward()
    params = [*model.stages[0].join.named_parameters(), *model.stages[0].absolute.named_parameters()]
    for name, p in params:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


class ShiftPatches(ConditionalEncoding):
    """A stand-in conditional generator: mixes each patch token with its row-major neighbour."""

    positions = (-1, 0)

    def __init__(self, ctx) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((ctx.embed_dim,), 0.5))
        self.calls: list[int] = []

    def forward(self, position, x, grid, num_prefix_tokens):
        self.calls.append(position)
        prefix, patches = x[:, :num_prefix_tokens], x[:, num_prefix_tokens:]
        return torch.cat([prefix, patches + self.weight * patches.roll(1, dims=1)], dim=1)


@pytest.mark.parametrize("join", ["input", "shared", "unshared", "lape", "lape:eta=1:chained"])
def test_joins_compose_with_a_conditional_generator(join, monkeypatch):
    monkeypatch.setitem(CONDITIONAL._entries, "test_shift", ShiftPatches)
    model = vitpos.create_model("vit_lite_7_4", **TINY, join=join, conditional="test_shift")
    plain = vitpos.create_model("vit_lite_7_4", **TINY, join=join)
    plain.load_state_dict(model.state_dict(), strict=False)
    images = torch.randn(2, 3, 24, 40)
    out = model(images)
    assert model.stages[0].conditional.calls == [-1, 0]
    assert out.shape == (2, 5) and not torch.allclose(out, plain(images))
    out.sum().backward()
    assert model.stages[0].conditional.weight.grad is not None
