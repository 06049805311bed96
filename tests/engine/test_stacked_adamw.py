"""The stacked AdamW is torch.optim.AdamW per member: bit for bit on a CPU, at its own rate, frozen when stopped."""

import pytest
import torch

from vitpos.engine.stacked_adamw import StackedAdamW

pytestmark = pytest.mark.usefixtures("one_thread")

SHAPES = [(3, 12, 8), (3, 8), (3, 1, 5, 8)]
DECAY = [0.05, 0.0, 0.05]


def _grads(generator: torch.Generator, dtype=torch.float32) -> list[torch.Tensor]:
    return [torch.randn(s, generator=generator, dtype=dtype) for s in SHAPES]


def _reference(
    params: list[torch.Tensor], member: int, lr: float
) -> tuple[list[torch.nn.Parameter], torch.optim.AdamW]:
    """Member ``member``'s slices under torch.optim.AdamW, grouped by decay as the trainer groups them."""
    ref = [torch.nn.Parameter(p[member].clone()) for p in params]
    groups = [
        {"params": [q for q, wd in zip(ref, DECAY, strict=True) if wd], "weight_decay": 0.05},
        {"params": [q for q, wd in zip(ref, DECAY, strict=True) if not wd], "weight_decay": 0.0},
    ]
    return ref, torch.optim.AdamW(groups, lr=lr)


def _train(rates: list[float], steps: int, stop: tuple[int, int] | None = None, dtype=torch.float32):
    """Stacked and reference runs on the same random gradients and a changing schedule; ``stop`` = (step, member)."""
    generator = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=generator, dtype=dtype) for s in SHAPES]
    refs = [_reference(params, i, lr) for i, lr in enumerate(rates)]
    optimizer = StackedAdamW(params, DECAY, members=3)
    for k in range(steps):
        scale = (k + 1) / steps
        if stop and k == stop[0]:
            optimizer.stop(stop[1])
        grads = _grads(generator, dtype)
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        for i, (ref, opt) in enumerate(refs):
            if stop and k >= stop[0] and i == stop[1]:
                continue
            for q, g in zip(ref, grads, strict=True):
                q.grad = g[i].clone()
            for group in opt.param_groups:
                group["lr"] = rates[i] * scale
            opt.step()
        optimizer.step(torch.tensor(rates, dtype=torch.float64) * scale, masked=bool(stop))
    return optimizer, refs


def test_every_member_is_torch_adamw_bit_for_bit_in_float32():
    """One rate for all: the arithmetic of the single-model trainer's AdamW, unchanged to the last bit."""
    optimizer, refs = _train([2e-3] * 3, steps=25)
    for i, (ref, _) in enumerate(refs):
        for p, q in zip(optimizer.params, ref, strict=True):
            assert torch.equal(p[i], q.detach())


def test_each_member_trains_at_its_own_rate():
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=12)
    for i, (ref, _) in enumerate(refs):
        for p, q in zip(optimizer.params, ref, strict=True):
            assert torch.equal(p[i], q.detach())
    assert not torch.equal(optimizer.params[0][0], optimizer.params[0][1])


def test_a_stopped_member_is_frozen_exactly_and_the_others_go_on(float64):
    """Stopped at step 4 of 10: its parameters, moments and step count stay as they were, even under a
    NaN gradient; the other members still equal torch.optim.AdamW."""
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=4, dtype=torch.float64)
    frozen = optimizer.state_of(1)
    for p in optimizer.params:
        p.grad = torch.full_like(p, float("nan"))
    optimizer.stop(1)
    optimizer.step(torch.tensor([1e-3, 5e-3, 2e-2], dtype=torch.float64))
    after = optimizer.state_of(1)
    for key, tensors in frozen.items():
        for a, b in zip(tensors, after[key], strict=True):
            assert torch.equal(a, b), key
    assert float(after["steps"][0]) == 4.0 and int(optimizer.steps[0]) == 5
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=10, stop=(4, 1), dtype=torch.float64)
    for i, (ref, _) in enumerate(refs):
        for p, q in zip(optimizer.params, ref, strict=True):
            torch.testing.assert_close(p[i], q.detach(), rtol=0, atol=1e-12)
    assert optimizer.active.tolist() == [True, False, True]


def test_tensors_without_their_members_are_refused():
    with pytest.raises(ValueError, match="3 members on axis 0, got shapes \\[\\(2, 4\\)\\]"):
        StackedAdamW([torch.zeros(3, 4), torch.zeros(2, 4)], [0.0, 0.0], members=3)
    optimizer = StackedAdamW([torch.zeros(3, 4)], [0.0], members=3)
    with pytest.raises(RuntimeError, match="has no gradient; run the backward pass first"):
        optimizer.step(torch.ones(3, dtype=torch.float64))
