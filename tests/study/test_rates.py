"""The learning rate per family and task: the best validation metric of the grid, recorded in rates.json."""

import json

import pytest

from vitpos.study.families import parse_family
from vitpos.study.protocol import StudyConfig
from vitpos.study.rates import Rates, choose, rate_key, rate_trials


def test_the_best_validation_metric_wins_then_fewer_steps_then_the_smaller_rate():
    assert choose({1e-3: {"val": 0.9, "steps": 10}, 2e-3: {"val": 0.95, "steps": 99}}) == 2e-3
    assert choose({1e-3: {"val": 1.0, "steps": 200}, 5e-3: {"val": 1.0, "steps": 90}}) == 5e-3
    assert choose({5e-3: {"val": 1.0, "steps": 90}, 1e-3: {"val": 1.0, "steps": 90}}) == 1e-3


def test_a_pretrained_family_shares_its_plain_models_selection():
    config = StudyConfig(families=tuple(parse_family(f) for f in ("fourier", "fourier_pretrained", "learned")))
    assert rate_key(config.families[0]) == rate_key(config.families[1]) != rate_key(config.families[2])
    trials = rate_trials(config)
    assert len(trials) == 2
    for _, cells in trials.values():
        assert [c.task for c in cells] == ["direction", "distance", "absolute"]
        assert {c.seed for c in cells} == {config.rate_seed} and config.rate_seed >= config.seeds


def test_rates_are_recorded_and_chosen_only_once_the_grid_is_complete(tmp_path):
    rates = Rates(tmp_path)
    grid = (1e-3, 2e-3)
    rates.add("k", "learned", "direction", 1e-3, {"val": 0.8, "steps": 50, "stop": "patience", "flagged": False})
    assert rates.chosen("k", grid) == {} and rates.has("k", "direction", 1e-3)
    rates.add("k", "learned", "direction", 2e-3, {"val": 0.9, "steps": 60, "stop": "patience", "flagged": False})
    assert Rates(tmp_path).chosen("k", grid) == {"direction": 2e-3}  # read back from rates.json
    assert json.loads((tmp_path / "rates.json").read_text())["k"]["family"] == "learned"


def test_the_rate_seed_must_not_be_reported():
    with pytest.raises(ValueError, match="rate_seed 3 is one of the reported seeds"):
        StudyConfig(seeds=5, rate_seed=3)
