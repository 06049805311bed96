"""Every slot value on every host trains under CPU autocast (bf16 and fp16) and stays close to float32.

Tolerances: outputs within 6e-2 (bf16) / 1e-2 (fp16) of float32 (logits of order one; bf16 keeps
8 significant bits, fp16 11); gradients reach every position parameter in float32 and finite, and
all of them together point the way float32's do (cosine similarity >= COSINE). The loss is a
fixed random read-out of every token's features, so gradients are of order one and fp16 needs no
loss scale.
"""

from __future__ import annotations

import pytest
import torch

import vitpos
from vitpos import PyramidConfig
from vitpos.registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE
from vitpos.spec import SlotSpec

from ..conftest import TINY, TINY_PVT, TINY_SWIN
from ..encodings.relative.test_slot import ISSUE_STRINGS

RELATIVE_VALUES = [
    *ISSUE_STRINGS,  # every relative method, as in the slot tests
    "irpe:product:bias:k",
    "irpe:euclidean:bias:qk:unshared",
    "irpe:cross:ctx:qkv:unshared",
    "irpe:quant:ctx:qv",
]
OTHER_SLOTS = [
    *({"absolute": name} for name in ABSOLUTE.names() if name != "none"),
    *({"absolute": "learned", "join": name} for name in JOIN.names() if name != "input"),
    {"absolute": "sincos2d", "join": "lape"},
    {"absolute": "none", "join": "lape", "relative": "swin"},  # LaPE's normalised bias: a dense term
    *({"absolute": "none", "conditional": name} for name in CONDITIONAL.names() if name != "none"),
    {"absolute": "none", "conditional": "peg@-1:pad=circular"},
]
HOSTS = ("vit", "swin", "pvt")
TOLERANCE = {torch.bfloat16: (6e-2, 0.98), torch.float16: (1e-2, 0.99)}


def test_the_lists_cover_every_registered_value():
    assert {SlotSpec.parse(v).name for v in RELATIVE_VALUES} == set(RELATIVE.names()) - {"none"}
    for slot, registry in (("absolute", ABSOLUTE), ("join", JOIN), ("conditional", CONDITIONAL)):
        named = {SlotSpec.parse(s[slot]).name for s in OTHER_SLOTS if slot in s}
        assert named | {"none", "input"} >= set(registry.names()), slot


def build(host: str, slots: dict) -> torch.nn.Module:
    if host == "vit":
        model = vitpos.create_model("vit_lite_7_4", **TINY, **slots)
    else:
        settings = TINY_SWIN if host == "swin" else {**TINY_PVT, "sr_ratios": None}
        model = vitpos.create_model(PyramidConfig(**settings), **slots)
    with torch.no_grad():  # tables start at zero: make every position parameter count
        for name, p in model.named_parameters():
            if ".relative." in name or "pos" in name or "pe" in name.split(".")[0]:
                p.normal_(std=0.2)
    return model.train()


def step(model: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype | None):
    model.zero_grad()
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        # every token (the ViT's prefix tokens too): gradients reach every table of every layer
        features = model.forward_tokens(x) if model.cfg.num_stages == 1 else model.forward_features(x)
    out = torch.cat([f.float().flatten() for f in (features if isinstance(features, list) else [features])])
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))  # a fixed random read-out
    (out * weight).sum().backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads


def check(host: str, slots: dict, dtype: torch.dtype) -> None:
    model = build(host, slots)
    x = torch.randn(2, 3, 32, 32)
    expected, expected_grads = step(model, x, None)
    out, grads = step(model, x, dtype)
    atol, cosine = TOLERANCE[dtype]
    torch.testing.assert_close(out, expected, atol=atol, rtol=0)
    assert grads.keys() == expected_grads.keys()
    position = [n for n in grads if any(part in n for part in (".relative.", "peg", "pos", "join", "absolute"))]
    for name in position:
        assert grads[name].dtype == torch.float32 and torch.isfinite(grads[name]).all(), name
    if position:
        got = torch.cat([grads[n].flatten() for n in position])
        want = torch.cat([expected_grads[n].flatten() for n in position])
        assert torch.nn.functional.cosine_similarity(got, want, dim=0) >= cosine


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("relative", RELATIVE_VALUES)
def test_every_relative_value_trains_under_autocast(relative, host, dtype, one_thread):
    check(host, {"absolute": "none", "relative": relative}, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("slots", OTHER_SLOTS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_every_absolute_join_and_conditional_value_trains_under_autocast(slots, host, dtype, one_thread):
    check(host, slots, dtype)
