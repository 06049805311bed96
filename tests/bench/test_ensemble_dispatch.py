"""bench.ensemble_dispatch counts each distinct training once (a colour-shift cell reuses its absolute
model) and every rate trial on every trial seed."""

import json

import torch

from bench.ensemble_dispatch import member_steps
from vitpos.study.rates import Rates


def test_member_steps_count_each_training_once_and_the_rate_trials(tmp_path):
    cells = tmp_path / "cells" / "learned"
    cells.mkdir(parents=True)
    for name, steps in (
        ("direction-n256-seed0", 32),
        ("absolute-n256-seed0", 24),
        ("absolute_colorshift-n256-seed0", 24),
        ("absolute-n256-seed1", 16),
    ):
        (cells / f"{name}.json").write_text(json.dumps({"steps": steps}))
    rates = Rates(tmp_path)
    for lr, seed, steps in ((0.005, 1000, 8), (0.005, 1001, 7), (0.002, 1000, 5)):
        rates.add(
            "learned", "learned", "direction", lr, seed, {"val": 0.5, "steps": steps, "stop": "cap", "flagged": False}
        )
    assert member_steps(tmp_path) == 32 + 24 + 16 + 8 + 7 + 5


def run_cells(x):
    """Named as the study's reported runs are."""
    return train_ensemble(x)


def train_ensemble(x):
    """Named as the ensemble's training loop is: a view and an addition."""
    return x.view(2, 2) + 1


def test_each_operation_counts_towards_its_innermost_phase_and_part():
    from bench.ensemble_dispatch import PhaseCount

    x = torch.ones(4)
    with PhaseCount() as count:
        run_cells(x)
        x * 2  # outside any part: elsewhere
    assert count.phases == {("reported runs", "training loop around the step"): 2, ("elsewhere", "other"): 1}
    assert count.phase_kernels == {("reported runs", "training loop around the step"): 1, ("elsewhere", "other"): 1}
