"""bench.ensemble_dispatch divides by each distinct training's steps: a colour-shift cell reuses its absolute model."""

import json

from bench.ensemble_dispatch import member_steps


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
    trials = {"direction": {"trials": {"0.005": {"steps": 8}, "0.002": {"steps": 5}}}, "family": "learned"}
    (tmp_path / "rates.json").write_text(json.dumps({"learned": trials}))
    assert member_steps(tmp_path) == 32 + 24 + 16 + 8 + 5
