"""The iRPE baselines and the Swin bias: sizes, equivalences with iRPE forms, hand values."""

import math

import pytest
import torch

from vitpos.encodings.base import SlotContext
from vitpos.encodings.relative.classic import offset_sinusoids
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

CTX = SlotContext(embed_dim=16, num_heads=2, depth=1, grid=(4, 5), num_prefix_tokens=1)


def build(text: str, ctx: SlotContext = CTX):
    spec = SlotSpec.parse(text)
    RELATIVE.get(spec.name).validate(spec)
    return RELATIVE.get(spec.name).from_spec(spec, ctx, layer=0).double()


def random_qk(n: int = 21):
    return torch.randn(2, 2, n, 8, dtype=torch.float64), torch.randn(2, 2, n, 8, dtype=torch.float64)


@pytest.mark.parametrize(
    "text,sizes",
    [
        ("shaw", {"table_k": (50, 8), "table_v": (50, 8)}),
        ("shaw:max_dist=2", {"table_k": (26, 8), "table_v": (26, 8)}),
        ("huang", {"table": (50, 8)}),
        ("xl", {"u": (8,), "v": (8,), "proj.weight": (8, 8), "prefix_key": (1, 8)}),
        ("sasa", {"table_x": (2 * 5 - 1 + 1, 4), "table_y": (2 * 4 - 1 + 1, 4)}),
        ("sasa:max_dist=6", {"table_x": (14, 4), "table_y": (14, 4)}),
        ("swin", {"table": (2, (2 * 4 - 1) * (2 * 5 - 1) + 1)}),
    ],
)
def test_parameter_shapes(text, sizes):
    assert {n: tuple(p.shape) for n, p in build(text).named_parameters()} == sizes


def test_shaw_is_contextual_product_on_keys_and_values_with_the_clip_index():
    shaw, irpe = build("shaw:max_dist=2"), build("irpe:product:ctx:kv:clip:ratio=1")
    with torch.no_grad():
        for a, b in ((shaw.table_k, irpe.table_k), (shaw.table_v, irpe.table_v)):
            a.normal_()
            b.copy_(a)
    q, k = random_qk()
    torch.testing.assert_close(
        shaw.relative_terms((4, 5), 1).logits(q, k, 0.3), irpe.relative_terms((4, 5), 1).logits(q, k, 0.3)
    )
    attn = torch.rand(2, 2, 21, 21, dtype=torch.float64).softmax(-1)
    torch.testing.assert_close(shaw.relative_terms((4, 5), 1).values(attn), irpe.relative_terms((4, 5), 1).values(attn))


def test_huang_is_contextual_query_and_key_terms_with_one_tied_table():
    huang, irpe = build("huang"), build("irpe:product:ctx:qk:clip:ratio=1.5")
    with torch.no_grad():
        huang.table.normal_()
        irpe.table_q.copy_(huang.table)
        irpe.table_k.copy_(huang.table)
    q, k = random_qk()
    torch.testing.assert_close(
        huang.relative_terms((4, 5), 1).logits(q, k, 0.3), irpe.relative_terms((4, 5), 1).logits(q, k, 0.3)
    )


def test_xl_offset_sinusoids_by_hand():
    # max_dist 1: a 3x3 grid of offsets; bucket 2 is (dy, dx) = (-1, 1); dim 8 -> 4 per axis, freqs 1, 1/100
    s = offset_sinusoids(1, 8)
    assert s.shape == (9, 8)
    expected = [
        math.sin(1),
        math.cos(1),
        math.sin(0.01),
        math.cos(0.01),
        math.sin(-1),
        math.cos(-1),
        math.sin(-0.01),
        math.cos(-0.01),
    ]
    torch.testing.assert_close(s[2], torch.tensor(expected, dtype=torch.float64))


def test_xl_with_zero_u_v_and_prefix_key_only_adds_position_keys():
    xl = build("xl")
    q, k = random_qk()
    bias = xl.relative_terms((4, 5), 1).logits(q, k, 0.5)
    assert bias.shape == (2, 2, 21, 21)
    assert (bias[..., 0, :] == 0).all() and (bias[..., :, 0] == 0).all()  # prefix pairs: zero key at start
    with torch.no_grad():
        xl.u.fill_(1.0)
    terms = xl.relative_terms((4, 5), 1)
    torch.testing.assert_close(terms.logits(q, k, 0.5), bias)  # u meets the keys in the content product
    torch.testing.assert_close(terms.content_query(q), q + 1.0)


def test_swin_clips_offsets_at_the_training_grid():
    swin = build("swin")
    native = swin.position_bias((4, 5), 0)
    assert native.shape == (2, 20, 20)
    assert swin.position_bias((4, 5), 0).unique().numel() == (2 * 4 - 1) * (2 * 5 - 1) * 2
    wide = swin.position_bias((1, 12), 0)  # offsets up to 11 columns reuse the +-4 entries
    torch.testing.assert_close(wide[:, 0, 4:], wide[:, 0, 4:5].expand(-1, 8))
    torch.testing.assert_close(wide[:, 0, :5], native[:, 0, :5])
    with_prefix = swin.position_bias((4, 5), 2)
    assert with_prefix.shape == (2, 22, 22)
    torch.testing.assert_close(with_prefix[:, :2], swin.table[:, -1:, None].expand(-1, 2, 22))


def test_sasa_concatenates_x_and_y_halves():
    sasa = build("sasa")
    with torch.no_grad():
        sasa.table_x.normal_()
        sasa.table_y.normal_()
    q, k = random_qk()
    bias = sasa.relative_terms((4, 5), 1).logits(q, k, 1.0)
    # query at row 1, col 3 (token 1 + 8); key at row 3, col 0 (token 1 + 15): dy = -2, dx = 3
    i, j = 1 + 8, 1 + 15
    r = torch.cat([sasa.table_x[3 + 4], sasa.table_y[-2 + 3]])
    torch.testing.assert_close(bias[..., i, j], q[..., i, :] @ r)
