"""Optimiser groups, the learning-rate schedule and the weight EMA."""

import itertools
import math

import pytest
import torch

import vitpos
from vitpos.engine.optim import ModelEma, WarmupCosine, build_optimizer, param_groups

from ..conftest import TINY


@pytest.mark.parametrize("absolute", ["learned", "fourier", "learnable_sincos"])
def test_no_decay_on_norms_biases_tokens_and_position_parameters(absolute):
    model = vitpos.create_model("vit_lite_7_4", **TINY, absolute=absolute)
    decay, exempt = param_groups(model, 0.05)
    assert decay["weight_decay"] == 0.05 and exempt["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    exempt_names = {names[id(p)] for p in exempt["params"]}
    decay_names = {names[id(p)] for p in decay["params"]}
    assert not exempt_names & decay_names and len(exempt_names | decay_names) == len(names)
    assert {"cls_token", "norm.weight", "norm.bias", "head.bias", "stages.0.blocks.0.attn.qkv.bias"} <= exempt_names
    assert {n for n in names.values() if n.startswith("stages.0.absolute.")} <= exempt_names
    decayed = {
        "stages.0.blocks.0.attn.qkv.weight",
        "stages.0.blocks.0.mlp.fc1.weight",
        "head.weight",
        "downsamples.0.proj.weight",
    }
    assert decayed <= decay_names
    assert isinstance(build_optimizer(model, 1e-3, 0.05, (0.9, 0.999)), torch.optim.AdamW)


def test_warmup_then_cosine():
    s = WarmupCosine(peak=1e-3, floor=1e-5, warmup=10, total=110)
    assert [s(i) for i in range(3)] == pytest.approx([1e-4, 2e-4, 3e-4])
    assert s(9) == pytest.approx(1e-3)
    assert s(10) == pytest.approx(1e-3)
    assert s(60) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))  # half way down the cosine
    assert s(35) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + math.cos(math.pi / 4)))
    assert s(110) == pytest.approx(1e-5) and s(500) == pytest.approx(1e-5)
    assert WarmupCosine(1.0, 0.0, 0, 10)(0) == 1.0


def test_ema_follows_the_formula():
    model = torch.nn.Linear(3, 2)
    ema = ModelEma(model, decay=0.9)
    start = ema.module.weight.clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    ema.update(model)
    assert torch.allclose(ema.module.weight, 0.9 * start + 0.1 * model.weight)
    assert not ema.module.weight.requires_grad


def test_a_warm_up_into_the_cool_down_is_warned_as_the_schedule_runs_it():
    from vitpos.engine.optim import warn_long_warmup

    # 2 epochs of 4 steps, warm-up 1.5 epochs (6 steps), cool-down 1 epoch: the cosine would end at step 4
    schedule = WarmupCosine(1e-3, 1e-5, warmup=6, total=4)
    lrs = [schedule(s) for s in range(8)]
    assert lrs[5] == lrs[6] == 1e-3 and lrs[7] == 1e-5 and all(a < b for a, b in itertools.pairwise(lrs[:6]))
    with pytest.warns(UserWarning) as said:
        warn_long_warmup(schedule, 8, 1.5, 2)
    assert str(said[0].message) == (
        "warmup_epochs 1.5 runs into the cool-down (the last 1 of 2 epochs, from step 5): the learning rate rises "
        "linearly over the first 6 steps to its peak 0.001, stays there one step, then drops at once to min_lr 1e-05 "
        "for the last 1 step(s); it never follows the cosine decay. Keep warmup_epochs + cooldown_epochs at most epochs"
    )
