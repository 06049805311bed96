"""Flat stacked AdamW = torch.optim.AdamW per member: bit for bit on a CPU, at its own rate, frozen when stopped."""

import pytest
import torch

from vitpos.engine.stacked_adamw import StackedAdamW

pytestmark = pytest.mark.usefixtures("one_thread")

SHAPES = [(12, 8), (1, 5, 8), (8,)]
DECAYED = 2
"""The first two tensors are decayed (they lead the flat buffer), the last is not."""


def _reference(member: torch.Tensor, lr: float) -> tuple[list[torch.nn.Parameter], torch.optim.AdamW]:
    """A member's row as separate tensors under torch.optim.AdamW, grouped by decay as the trainer groups them."""
    ref = [torch.nn.Parameter(t.clone().view(s)) for t, s in zip(_split(member), SHAPES, strict=True)]
    groups = [{"params": ref[:DECAYED], "weight_decay": 0.05}, {"params": ref[DECAYED:], "weight_decay": 0.0}]
    return ref, torch.optim.AdamW(groups, lr=lr)


def _split(row: torch.Tensor) -> list[torch.Tensor]:
    sizes = [torch.Size(s).numel() for s in SHAPES]
    return list(row.split(sizes))


def _decayed_columns() -> int:
    return sum(torch.Size(s).numel() for s in SHAPES[:DECAYED])


def _train(rates: list[float], steps: int, stop: tuple[int, int] | None = None, dtype=torch.float32):
    """Flat and reference runs on the same random gradients and a changing schedule; ``stop`` = (step, member)."""
    generator = torch.Generator().manual_seed(0)
    width = sum(torch.Size(s).numel() for s in SHAPES)
    flat = torch.randn(len(rates), width, generator=generator, dtype=dtype)
    refs = [_reference(flat[i], lr) for i, lr in enumerate(rates)]
    optimizer = StackedAdamW(flat, _decayed_columns(), 0.05)
    scales = torch.tensor([(k + 1) / steps for k in range(steps)], dtype=torch.float64)
    optimizer.plan(scales[:, None] * torch.tensor(rates, dtype=torch.float64))  # each member's rate, rising
    for k in range(steps):
        scale = (k + 1) / steps
        if stop and k == stop[0]:
            optimizer.stop(stop[1])
        grad = torch.randn(flat.shape, generator=generator, dtype=dtype)
        for i, (ref, opt) in enumerate(refs):
            if stop and k >= stop[0] and i == stop[1]:
                continue
            for q, g in zip(ref, _split(grad[i]), strict=True):
                q.grad = g.clone().view(q.shape)
            for group in opt.param_groups:
                group["lr"] = rates[i] * scale
            opt.step()
        optimizer.step(grad)
    return optimizer, refs


def _assert_member_is(optimizer: StackedAdamW, refs: list, equal: bool) -> None:
    for i, (ref, _) in enumerate(refs):
        for p, q in zip(_split(optimizer.flat[i]), ref, strict=True):
            if equal:
                assert torch.equal(p, q.detach().flatten())
            else:
                torch.testing.assert_close(p, q.detach().flatten(), rtol=0, atol=1e-12)


def test_every_member_is_torch_adamw_bit_for_bit_in_float32():
    """One rate for all: the arithmetic of the single-model trainer's AdamW, unchanged to the last bit."""
    optimizer, refs = _train([2e-3] * 3, steps=25)
    _assert_member_is(optimizer, refs, equal=True)


def test_each_member_trains_at_its_own_rate():
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=12)
    _assert_member_is(optimizer, refs, equal=True)
    assert not torch.equal(optimizer.flat[0], optimizer.flat[1])


def test_a_stopped_member_is_frozen_exactly_and_the_others_go_on(float64):
    """Stopped at step 4 of 10: its parameters, moments and step count stay as they were, even under a
    NaN gradient; the other members still equal torch.optim.AdamW."""
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=4, dtype=torch.float64)
    frozen = optimizer.state_of(1)
    optimizer.stop(1)
    grad = torch.randn(optimizer.flat.shape)
    grad[1] = float("nan")
    optimizer.plan(torch.tensor([[1e-3, 5e-3, 2e-2]], dtype=torch.float64))
    optimizer.step(grad)
    after = optimizer.state_of(1)
    for key, tensor in frozen.items():
        assert torch.equal(tensor, after[key]), key
    assert float(after["steps"]) == 4.0 and int(optimizer.steps[0]) == 5
    assert not optimizer.flat.isnan().any()
    optimizer, refs = _train([1e-3, 5e-3, 2e-2], steps=10, stop=(4, 1), dtype=torch.float64)
    _assert_member_is(optimizer, refs, equal=False)
    assert optimizer.active.tolist() == [True, False, True]


def test_a_buffer_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="needs a \\(members, parameters\\) buffer and 0 <= decayed <= parameters"):
        StackedAdamW(torch.zeros(3, 4, 2), 0, 0.05)
    with pytest.raises(ValueError, match="got shape \\(3, 4\\) and decayed = 5"):
        StackedAdamW(torch.zeros(3, 4), 5, 0.05)


def test_a_step_beyond_the_plan_and_a_plan_of_the_wrong_width_are_refused():
    optimizer = StackedAdamW(torch.zeros(3, 4), 0, 0.05)
    with pytest.raises(ValueError, match="0 steps taken and 0 planned; plan\\(rates\\) the steps to come"):
        optimizer.step(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="needs rates of shape \\(steps, 3\\), got \\(2, 4\\)"):
        optimizer.plan(torch.zeros(2, 4, dtype=torch.float64))
