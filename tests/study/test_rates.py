"""The learning rate per family and task: the best mean validation metric of the grid over the trial seeds,
recorded in rates.json."""

import json

import pytest

from vitpos.study.families import parse_family
from vitpos.study.protocol import StudyConfig
from vitpos.study.rates import Rates, choose, mean_scores, rate_key, rate_trials


def test_the_best_validation_metric_wins_then_fewer_steps_then_the_smaller_rate():
    assert choose({1e-3: {"val": 0.9, "steps": 10}, 2e-3: {"val": 0.95, "steps": 99}}) == 2e-3
    assert choose({1e-3: {"val": 1.0, "steps": 200}, 5e-3: {"val": 1.0, "steps": 90}}) == 5e-3
    assert choose({5e-3: {"val": 1.0, "steps": 90}, 1e-3: {"val": 1.0, "steps": 90}}) == 1e-3


def test_a_pretrained_family_shares_its_plain_models_selection():
    config = StudyConfig(families=tuple(parse_family(f) for f in ("fourier", "fourier_pretrained", "learned")))
    assert rate_key(config.families[0]) == rate_key(config.families[1]) != rate_key(config.families[2])
    trials = rate_trials(config)
    assert len(trials) == 2
    for _, cells in trials.values():  # every training task on each trial seed
        assert [c.task for c in cells] == ["direction", "distance", "absolute"] * 2
        assert [c.seed for c in cells] == [1000] * 3 + [1001] * 3 and config.rate_seeds == (1000, 1001)
        assert min(config.rate_seeds) >= config.round_seeds[-1]  # above every seed of every round


def _trial(val: float, steps: int) -> dict:
    return {"val": val, "steps": steps, "stop": "patience", "flagged": False}


def test_rates_are_recorded_and_chosen_only_once_the_grid_is_complete_on_every_seed(tmp_path):
    rates = Rates(tmp_path)
    grid, seeds = (1e-3, 2e-3), (7, 8)
    rates.add("k", "learned", "direction", 1e-3, 7, _trial(0.8, 50))
    rates.add("k", "learned", "direction", 1e-3, 8, _trial(0.8, 50))
    rates.add("k", "learned", "direction", 2e-3, 7, _trial(1.0, 60))
    assert rates.chosen("k", grid, seeds) == {} and rates.has("k", "direction", 1e-3, 8)
    assert not rates.has("k", "direction", 2e-3, 8)
    rates.add("k", "learned", "direction", 2e-3, 8, _trial(0.5, 60))  # this seed stayed at chance
    assert Rates(tmp_path).chosen("k", grid, seeds) == {"direction": 1e-3}  # mean 0.8 beats 0.75; from rates.json
    assert json.loads((tmp_path / "rates.json").read_text())["k"]["family"] == "learned"


def test_a_rate_is_scored_by_its_mean_over_the_trial_seeds():
    assert mean_scores({"1": _trial(1.0, 90), "2": _trial(0.5, 30)}) == {"val": 0.75, "steps": 60}


def test_the_rate_seeds_must_not_be_reported():
    with pytest.raises(ValueError, match=r"rate_seeds \(3,\) must be given and lie above the reported seeds 0..19"):
        StudyConfig(seeds=5, rate_seeds=(3,))
    with pytest.raises(ValueError, match="rate_seeds"):
        StudyConfig(seeds=5, rate_seeds=(15, 1000))  # seed 15 runs in the third round
