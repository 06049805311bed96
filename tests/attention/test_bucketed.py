"""The bucketed paths (stored, chunked): both equal the plain computation; every path of a model agrees;
memory shape."""

import warnings

import pytest
import torch

import vitpos
from vitpos.attention import PATHS, bucketed
from vitpos.attention.bucketed import bucketed_attention, chunk_rows
from vitpos.attention.policy import CHUNK_FROM_TOKENS

from ..conftest import TINY
from ..encodings.relative.test_slot import LargestAllocation

B, H, N, D, K = 2, 3, 11, 4, 7
SCALE = 0.3


def inputs(maps: int, seed: int = 0, b: int = B, h: int = H, n: int = N) -> dict:
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    ids = torch.randint(0, K, (maps, n, n), generator=gen)
    return dict(
        q=rand(b, h, n, D), k=rand(b, h, n, D), v=rand(b, h, n, D),
        ids=ids if maps > 1 else ids[0],
        row=rand(b, h, n, K), row_bias=rand(1, h, 1, K), col=rand(b, h, n, K),
        bias=rand(h, n, n), value_table=rand(h, K, D),
    )  # fmt: skip


def plain(t: dict) -> torch.Tensor:
    """The same attention written with gathers over full (B, heads, N, N) tensors."""
    maps = t["ids"] if t["ids"].ndim == 3 else t["ids"][None]
    logits = SCALE * t["q"] @ t["k"].transpose(-2, -1) + t["bias"]
    for m in maps:
        index = m.expand(B, H, N, N)
        logits = logits + (t["row"] + t["row_bias"]).gather(-1, index)
        logits = logits + t["col"].gather(-1, m.t().expand(B, H, N, N)).transpose(-2, -1)
    weights = logits.softmax(-1)
    per_bucket = sum(
        torch.zeros(B, H, N, K, dtype=weights.dtype).scatter_add(-1, m.expand(B, H, N, N), weights) for m in maps
    )
    return weights @ t["v"] + per_bucket @ t["value_table"]


def efficient(t: dict, mode: str, chunk: int | None) -> torch.Tensor:
    out, weights = bucketed_attention(
        t["q"], t["k"], t["v"], SCALE, t["ids"], num_buckets=K, row_scores=t["row"] + t["row_bias"],
        col_scores=t["col"], bias=t["bias"], bucket_weights=True, mode=mode, chunk=chunk,
    )  # fmt: skip
    return out + weights @ t["value_table"]


@pytest.mark.parametrize("maps", [1, 2])
@pytest.mark.parametrize("mode,chunk", [("stored", None), ("chunked", 1), ("chunked", 4), ("chunked", None)])
def test_both_modes_equal_the_plain_attention_in_value_and_gradient(maps, mode, chunk):
    t = inputs(maps)
    leaves = [v for v in t.values() if v.requires_grad]
    weight = torch.randn(B, H, N, D, dtype=torch.float64)
    expected = plain(t)
    expected_grads = torch.autograd.grad((expected * weight).sum(), leaves)
    got = efficient(t, mode, chunk)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    for g, e in zip(torch.autograd.grad((got * weight).sum(), leaves), expected_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("mode", ["stored", "chunked"])
def test_gradcheck(mode):
    t = inputs(2, seed=1, b=1, h=2, n=5)

    def fn(q, k, v, row, col, bias):
        out, weights = bucketed_attention(
            q, k, v, SCALE, t["ids"], num_buckets=K, row_scores=row, col_scores=col, bias=bias,
            bucket_weights=True, mode=mode, chunk=3,
        )  # fmt: skip
        return out, weights

    assert torch.autograd.gradcheck(fn, (t["q"], t["k"], t["v"], t["row_bias"], t["col"], t["bias"]))


def test_missing_ids_and_unknown_modes_are_rejected():
    q = torch.randn(1, 1, 3, 2)
    with pytest.raises(ValueError, match="looked up by bucket id: pass ids"):
        bucketed_attention(q, q, q, 1.0, row_scores=torch.randn(1, 1, 3, 4))
    with pytest.raises(ValueError, match="mode must be 'chunked' or 'stored'"):
        bucketed_attention(q, q, q, 1.0, mode="flash")


def test_chunk_rows():
    assert chunk_rows(1000, 64) == 64 and chunk_rows(10, 64) == 10 and chunk_rows(1000, 4) == bucketed.MIN_CHUNK


def test_mixed_dtypes_are_refused_with_the_dtypes_named():
    q = torch.randn(1, 1, 3, 2)
    with pytest.raises(ValueError, match=r"one dtype, got torch\.bfloat16, torch\.float32"):
        bucketed_attention(q, q, q.bfloat16(), 1.0)


SPECS = [
    "irpe:product:ctx:qkv",
    "irpe:cross:ctx:qk:unshared",
    "irpe:product:bias:qk",
    "shaw",
    "xl",
    "huang",
    "sasa",
    "swin",
]
MODELS = [dict(relative=text) for text in SPECS] + [
    dict(absolute="none", join="lape", relative="irpe:product:bias:qk"),  # LaPE's normalised bias: a dense bias
    dict(absolute="learned", join="lape", relative="irpe:product:ctx:qkv"),
]


@pytest.mark.parametrize("slots", MODELS, ids=lambda slots: ",".join(slots.values()))
def test_every_path_of_a_model_gives_the_same_output_and_gradients(slots, monkeypatch):
    monkeypatch.setattr(bucketed, "MIN_CHUNK", 3)
    model = vitpos.create_model("vit_lite_7_4", **TINY | dict(num_heads=2, embed_dim=16), **slots).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".relative." in name:
                p.normal_(std=0.5)
    x = torch.randn(2, 3, 32, 40, dtype=torch.float64)  # 4 x 5 grid + class token: chunks of 8, 8 and 5
    results, inference = {}, {}
    for name in PATHS:
        for block in model.stages[0].blocks:
            block.attn.path = name
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "attention path .* cannot compute")  # value terms under sdpa / flex
            with torch.no_grad():
                inference[name] = model(x)
            if name == "flex":  # forward only on CPU
                continue
            model.zero_grad()
            out = model(x)
        out.square().sum().backward()
        results[name] = (out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    expected, expected_grads = results.pop("explicit")
    for out in inference.values():
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
    for out, grads in results.values():
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
        assert grads.keys() == expected_grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(grad, expected_grads[name], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("text", ["irpe:product:ctx:qkv", "irpe:cross:bias:qk", "shaw"])
def test_long_sequences_train_without_any_n_by_n_tensor(text):
    """At N >= CHUNK_FROM_TOKENS the automatic path is chunked: nothing of B x heads x N x N
    (let alone N x N x d) is ever allocated, in forward or backward."""
    model = vitpos.create_model(
        "vit_lite_7_4", **TINY | dict(depth=1, num_heads=2, embed_dim=32, patch_size=2), relative=text
    )
    x = torch.randn(1, 3, 36, 36)  # 18 x 18 grid + class token
    n = 1 + 18 * 18
    assert n >= CHUNK_FROM_TOKENS
    model(x).sum().backward()  # builds the bucket ids: once per grid for every layer, not per step
    with LargestAllocation() as mode:
        model(x).sum().backward()
    assert mode.largest < 2 * n * n  # B x heads x N x N with B = 1, heads = 2
