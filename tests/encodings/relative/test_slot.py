"""Every relative encoding as a slot value: strings, errors, tables, grids, gradients, memory shape."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import vitpos
from vitpos import PositionConfig
from vitpos.encodings.base import SlotContext
from vitpos.encodings.relative import RelativeBias
from vitpos.encodings.relative.irpe import IRPEBias, IRPEContextual
from vitpos.models.layers import Attention
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from ...conftest import TINY
from .reference import reference_attention

ISSUE_STRINGS = [
    "irpe:product:ctx:k",
    "irpe:cross:bias:qk:unshared",
    "irpe:euclidean:ctx:qkv:ratio=20",
    "irpe:product:ctx:k:clip",
    "shaw",
    "xl",
    "huang",
    "sasa",
    "swin",
    "rope2d",
    "rope2d:mixed",
    "cpb",
]
EVERY_ENCODING = [
    *ISSUE_STRINGS,
    "irpe:quant:ctx:qkv:unshared",
    "irpe:quant:bias:q:squared:unscaled:ratio=3",
    "irpe:cross:ctx:qv",
    "irpe",
    "cpb:pretrained=8",
]


def relative_modules(model):
    return [block.attn.relative for block in model.stages[0].blocks]


@pytest.mark.parametrize("text", EVERY_ENCODING)
def test_strings_parse_and_round_trip(text):
    assert PositionConfig(relative=text).relative == text
    assert str(SlotSpec.parse(text)) == text
    cfg = vitpos.get_config("deit_tiny_patch16_224", relative=text)
    assert vitpos.ModelConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("irpe:product:cross:ctx", r"more than one method \('product' and 'cross'\)"),
        ("irpe:bias:ctx", r"more than one mode"),
        ("irpe:k:qk", r"more than one target set"),
        ("irpe:product:bias:kv", r"bias mode .* cannot act on values; use 'ctx' for v"),
        ("irpe:product:ctx:kq", r"in q, k, v order without repeats"),
        ("irpe:product:ctx:kk", r"in q, k, v order without repeats"),
        ("irpe:product:ctx:k:squared", r"'squared' changes the Quantization method only"),
        ("irpe:product:ctx:k:unscaled", r"'unscaled' applies to bias mode"),
        ("irpe:product:ctx:k:ratio=0.2", r"ratio must be a finite number >= 0.5"),
        ("irpe:product:ctx:k:ratio=inf", r"ratio must be a finite number >= 0.5"),
        ("irpe:product:ctx:k:ratio=abc", r"ratio='abc' is invalid"),
        ("irpe:product:ctx:k:beta=3", r"unknown option 'beta'; valid options: ratio"),
        (
            "irpe:manhattan:ctx:k",
            r"unknown flag 'manhattan'; valid flags: a method \(euclidean, quant, cross, product\)",
        ),
        ("irpe:product:ctx:k:clip:clip", r"flag 'clip' is given twice"),
        ("irpe@3:product", r"takes no '@' placement"),
        ("shaw:k", r"unknown flag 'k'"),
        ("shaw:max_dist=0", r"max_dist='0' is invalid \(must be an integer in 1..256\)"),
        ("xl:max_dist=2.5", r"max_dist='2.5' is invalid"),
        ("swin:max_dist=3", r"unknown option 'max_dist'"),
        ("rope2d:axial:mixed", r"choose one of axial, mixed"),
        ("rope2d:theta=-1", r"theta must be a positive number"),
        ("rope2d:spiral", r"unknown flag 'spiral'; valid flags: axial, mixed"),
        (
            "alibi",
            r"unknown relative encoding 'alibi'; valid values: .*huang, irpe, none, rope2d, sasa, shaw, swin, xl",
        ),
    ],
)
def test_invalid_values_say_what_to_change(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        PositionConfig(relative=text)


@pytest.mark.parametrize(
    "text,embed_dim,pattern",
    [
        ("rope2d", 12, r"head width divisible by 4, got 6"),
        ("xl", 12, r"head width divisible by 4, got 6"),
        ("sasa", 6, r"head width 3 is odd"),
    ],
)
def test_head_widths_an_encoding_cannot_use_are_rejected(text, embed_dim, pattern):
    with pytest.raises(ValueError, match=pattern):
        vitpos.create_model("vit_lite_7_4", **TINY | dict(embed_dim=embed_dim), relative=text)


@pytest.mark.parametrize(
    "text,shape,cls",
    [
        ("irpe:product:ctx:k", {"table_k": (50, 16)}, IRPEContextual),
        ("irpe:product:ctx:qkv:unshared", {f"table_{t}": (2, 50, 16) for t in "qkv"}, IRPEContextual),
        ("irpe:cross:ctx:k:ratio=1", {"table_k": (12, 16)}, IRPEContextual),
        ("irpe:euclidean:bias:k:ratio=20", {"bias_k": (1, 82)}, IRPEBias),
        ("irpe:cross:bias:qk:unshared", {"bias_q": (2, 16), "bias_k": (2, 16)}, IRPEBias),
    ],
)
def test_table_shapes_and_zero_init(text, shape, cls):
    rel = relative_modules(vitpos.create_model("vit_lite_7_4", **TINY, relative=text))[0]
    assert type(rel) is cls
    assert {n: tuple(p.shape) for n, p in rel.named_parameters()} == shape
    assert all((p == 0).all() for p in rel.parameters())


def test_content_independent_encodings_are_relative_biases():
    kinds = {t: relative_modules(vitpos.create_model("vit_lite_7_4", **TINY, relative=t))[0] for t in EVERY_ENCODING}
    biases = {t for t, rel in kinds.items() if isinstance(rel, RelativeBias)}
    assert biases == {
        "irpe:cross:bias:qk:unshared", "irpe:quant:bias:q:squared:unscaled:ratio=3", "swin", "cpb", "cpb:pretrained=8"
    }  # fmt: skip
    needs_weights = {t for t, rel in kinds.items() if rel.relative_terms((4, 4), 1).value_term}
    assert needs_weights == {
        "irpe:euclidean:ctx:qkv:ratio=20",
        "shaw",
        "irpe:quant:ctx:qkv:unshared",
        "irpe:cross:ctx:qv",
    }


@pytest.mark.parametrize(
    "text", ["irpe:product:bias:k", "irpe:cross:bias:qk:unshared", "irpe:quant:bias:q:clip", "swin"]
)
def test_bias_model_with_constant_tables_equals_the_model_without_it(text):
    plain = vitpos.create_model("vit_lite_7_4", **TINY).eval()
    biased = vitpos.create_model("vit_lite_7_4", **TINY, relative=text).eval()
    missing, unexpected = biased.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all(".attn.relative." in name for name in missing)
    with torch.no_grad():
        for rel in relative_modules(biased):
            for p in rel.parameters():
                p.fill_(0.7)
    x = torch.randn(2, 3, 32, 40)
    torch.testing.assert_close(biased(x), plain(x), rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # and a non-constant table does change the output
        relative_modules(biased)[0].relative_terms((4, 5), 1)  # cache warm-up must not hide the update
        next(relative_modules(biased)[0].parameters()).normal_(std=5.0)
    assert not torch.allclose(biased.forward_tokens(x), plain.forward_tokens(x), atol=1e-3)


@pytest.mark.parametrize("text", EVERY_ENCODING)
@pytest.mark.parametrize("prefix", [dict(), dict(head="gap"), dict(reg_tokens=2)])
def test_runs_at_grids_smaller_and_larger_than_training(text, prefix):
    model = vitpos.create_model("vit_lite_7_4", **TINY | prefix, relative=text).eval()  # trained at 4x4
    plain = vitpos.create_model("vit_lite_7_4", **TINY | prefix).eval()
    with torch.no_grad():
        for p in model.parameters():  # random tables, and attention far from uniform
            p.normal_(std=0.3)
        plain.load_state_dict(model.state_dict(), strict=False)
        for size in ((16, 24), (32, 32), (56, 40), (8, 72)):
            grid = model.stage_grids(size)[-1]
            x = torch.randn(2, 3, *size)
            feats = model.forward_tokens(x)
            assert feats.shape == (2, model.num_prefix_tokens + grid[0] * grid[1], 32)
            assert torch.isfinite(feats).all()
            assert not torch.allclose(feats, plain.forward_tokens(x), atol=1e-4)  # the encoding acts at every grid


@pytest.mark.parametrize("text", EVERY_ENCODING)
def test_gradients_reach_every_table(text):
    model = vitpos.create_model("vit_lite_7_4", **TINY, relative=text)
    # every token counts (through a class-token head the last layer only sees prefix buckets)
    model.forward_tokens(torch.randn(2, 3, 40, 24)).square().sum().backward()  # off the training grid
    for i, rel in enumerate(relative_modules(model)):
        for name, p in rel.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (i, name)
    assert {n for n in model.no_weight_decay() if ".attn.relative." in n} == {
        n for n, _ in model.named_parameters() if ".attn.relative." in n
    }


class LargestAllocation(TorchDispatchMode):
    """Records the largest new storage (in elements) any operator returns; views and in-place
    results, which share an input's storage, allocate nothing."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta" and t.untyped_storage().data_ptr() not in given:
                self.largest = max(self.largest, t.untyped_storage().nbytes() // t.element_size())
        return out


def largest_allocation(attn: Attention, text: str, grid, prefix: int, reference: bool = False) -> int:
    x = torch.randn(1, prefix + grid[0] * grid[1], attn.num_heads * attn.head_dim, requires_grad=True)
    with LargestAllocation() as mode:
        out = reference_attention(attn, text, x, grid, prefix, grid) if reference else attn(x, grid, prefix)
        out.sum().backward()
    return mode.largest


def nnd_setup(text: str, path: str = "explicit"):
    heads, head_dim, grid, prefix = 2, 16, (6, 6), 1
    spec = SlotSpec.parse(text)
    ctx = SlotContext(heads * head_dim, heads, 1, grid, prefix)
    attn = Attention(heads * head_dim, heads, relative=RELATIVE.get(spec.name).from_spec(spec, ctx))
    # the explicit path, whose N x N weights are the largest legitimate tensor
    attn.path = path
    n = prefix + grid[0] * grid[1]
    return attn, grid, prefix, n * n * head_dim


@pytest.mark.parametrize("path", ["explicit", "stored", "chunked"])
@pytest.mark.parametrize("text", [t for t in EVERY_ENCODING if not t.startswith(("rope2d", "cpb"))])
def test_the_efficient_path_never_allocates_an_n_n_d_tensor(text, path):
    # cpb's largest tensor is its network's hidden layer, one row of 512 per offset: test_cpb bounds it
    attn, grid, prefix, limit = nnd_setup(text, path)
    assert largest_allocation(attn, text, grid, prefix) < limit


def test_the_allocation_detector_catches_a_literal_implementation():
    text = "irpe:product:ctx:qkv"
    attn, grid, prefix, limit = nnd_setup(text)
    assert largest_allocation(attn, text, grid, prefix, reference=True) >= limit


def test_a_module_built_without_prefix_tokens_says_so():
    model = vitpos.create_model("vit_lite_7_4", **TINY | dict(head="gap"), relative="irpe:product:ctx:k")
    rel = relative_modules(model)[0]
    with pytest.raises(ValueError, match="built for a model without prefix tokens"):
        rel.relative_terms((4, 4), 1)


def test_eval_caches_bias_and_ids_and_invalidates_on_update():
    model = vitpos.create_model("vit_lite_7_4", **TINY, relative="irpe:product:bias:k").eval()
    first, second = relative_modules(model)[:2]
    with torch.no_grad():
        bias = first.relative_terms((5, 3), 1).bias
        assert first.relative_terms((5, 3), 1).bias is bias and torch.equal(bias, first.position_bias((5, 3), 1))
        assert first.bucket_ids((5, 3), 1, "cpu") is second.bucket_ids((5, 3), 1, "cpu")  # shared by layers
        first.bias_k.add_(1.0)
        assert not torch.equal(first.relative_terms((5, 3), 1).bias, bias)
    assert first.relative_terms((5, 3), 1).bias_table is not None  # autograd records: per bucket, nothing cached
