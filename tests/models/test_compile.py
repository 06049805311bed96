"""torch.compile: a model with all four slots active traces as one graph and equals eager."""

import pytest
import torch

import vitpos

from ..conftest import TINY

ALL_SLOTS = dict(absolute="learned", join="lape", conditional="peg@0", relative="irpe:product:ctx:qkv")


def all_slot_model() -> torch.nn.Module:
    model = vitpos.create_model("vit_lite_7_4", **TINY | dict(depth=1), **ALL_SLOTS)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".relative." in name:  # zero at start: make the relative terms count
                p.normal_(std=0.5)
    return model


def check_compiled_equals_eager(model: torch.nn.Module, backend: str, path: str | None) -> None:
    for block in model.stages[0].blocks:
        block.attn.path = path
    torch._dynamo.reset()  # each model recompiles the same forwards: earlier tests' graphs must not reach the limit
    compiled = torch.compile(model, backend=backend, fullgraph=True)  # fullgraph: no graph break anywhere
    x = torch.randn(2, 3, 32, 40)
    model.train()
    out = compiled(x)
    out.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    expected = model(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", [None, "chunked"], ids=["policy", "chunked"])
def test_all_four_slots_compile_without_graph_breaks(path):
    """Dynamo and AOT autograd (the custom attention's backward included); inductor's slow C++
    compilation is covered by the slow test below and ``python -m bench.compile``."""
    check_compiled_equals_eager(all_slot_model(), "aot_eager", path)


@pytest.mark.slow
def test_all_four_slots_compile_with_inductor():
    check_compiled_equals_eager(all_slot_model(), "inductor", None)


def test_rope_compiles_without_graph_breaks():
    """The compiled rotation is the real-arithmetic form of the eager complex one."""
    model = vitpos.create_model("vit_lite_7_4", **TINY | dict(depth=1), absolute="none", relative="rope2d:mixed")
    check_compiled_equals_eager(model, "aot_eager", None)
