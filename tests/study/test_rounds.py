"""The sequential rule in the study: failed runs left out and counted, the next round's runs, a study that
runs its rounds and resumes them."""

import json

import pytest

from vitpos.study import StudyConfig, parse_family, run_study
from vitpos.study.cells import UNTRAINED, Cell
from vitpos.study.claims import CLAIMS, evaluate_claims, failed_seeds
from vitpos.study.execute import run_cells
from vitpos.study.redgreen import RedGreenStudy
from vitpos.study.sections import verdict_table
from vitpos.study.verdicts import NOT_CONVERGED, REPRODUCED

from .test_run import tiny

pytestmark = pytest.mark.usefixtures("one_thread")

RULE = StudyConfig().sequential


def _run(test: float, best_val: float, train: float, stop: str = "patience") -> dict:
    """A stored cell of an accuracy task (in %, ``test`` as a fraction) with a one-epoch curve."""
    return {"test": test, "metric": "accuracy", "stop": stop, "classes": 2, "curve": [[31, 0.5, train, best_val]]}


def _claim(quantity: str):
    return next(c for c in CLAIMS if c.quantity == quantity)


def test_a_run_that_stopped_short_where_other_seeds_learned_is_a_failure_left_out_and_counted():
    results = {Cell("learned", "direction", 1000, s): _run(1.0, 100.0, 99.0) for s in range(4)}
    results[Cell("learned", "direction", 1000, 4)] = _run(0.5, 52.0, 50.0)  # stayed at chance
    claim = _claim("learned direction acc %")
    assert failed_seeds(claim, results, 1000) == {4}
    ((_, values, verdict),) = evaluate_claims(results, 1000, (), {"learned"}, (claim,), rule=RULE)
    assert (verdict.outcome, verdict.n, verdict.failed) == (REPRODUCED, 4, 1) and set(values) == {0, 1, 2, 3}
    assert "(n=4 + 1 failed to train)" in verdict_table([(claim, values, verdict)])
    results[Cell("learned", "direction", 1000, 5)] = _run(0.8, 84.0, 80.0)  # a plateau part-way: both below 90
    results[Cell("learned", "direction", 1000, 6)] = _run(0.85, 86.0, 99.0)  # fitted its images, not the test's
    results[Cell("learned", "direction", 1000, 7)] = _run(0.89, 89.9, 89.9)  # just below the learned level
    assert failed_seeds(claim, results, 1000) == {4, 5, 7}


def test_a_part_way_plateau_is_the_models_result_where_no_seed_learned():
    results = {Cell("learned", "direction", 1000, s): _run(0.8, 84.0, 80.0) for s in range(5)}
    assert failed_seeds(_claim("learned direction acc %"), results, 1000) == set()


def test_runs_that_all_stay_at_chance_are_the_models_result_not_failures():
    results = {Cell("none", "direction", 1000, s): _run(0.49 + s / 100, 55.0 + s, 50.0) for s in range(5)}
    claim = _claim("none direction acc %")
    assert failed_seeds(claim, results, 1000) == set()
    ((_, values, verdict),) = evaluate_claims(results, 1000, (), {"none"}, (claim,), rule=RULE)
    assert verdict.outcome == REPRODUCED and verdict.n == 5 and verdict.failed == 0 and set(values) == set(range(5))


def test_a_run_still_at_the_cap_makes_a_claim_that_is_not_reproduced_not_converged():
    results = {Cell("learned", "direction", 1000, s): _run(0.7, 70.0, 70.0, "cap") for s in range(5)}
    claim = _claim("learned direction acc %")
    ((_, _, verdict),) = evaluate_claims(results, 1000, (), {"learned"}, (claim,), rule=RULE)
    assert verdict.outcome == NOT_CONVERGED and verdict.flagged == 5


def test_the_next_round_trains_the_runs_of_the_undecided_claims_only():
    study = RedGreenStudy(StudyConfig(families=(parse_family("learned"), parse_family("none"))))
    spread = [0.0, -6.0, 6.0, -3.0, 3.0]  # learned's left/right: mean 95, undecided at 5 seeds
    results = {Cell("learned", "direction", 1000, s): _run(0.95 + spread[s] / 100, 100.0, 99.0) for s in range(5)}
    results |= {Cell("none", "direction", 1000, s): _run(0.5, 55.0, 50.0) for s in range(5)}
    more = study.next_cells(results)
    assert {(c.family, c.task, c.train_size) for c in more} == {("learned", "direction", 1000)}
    assert [c.seed for c in more] == list(range(5, 10))


def _probes(before: float) -> dict:
    return {
        "before": {"left_right": before, "up_down": 0.5, "distance_r2": 0.0},
        "after": {"left_right": 0.99, "up_down": 0.45, "distance_r2": 0.9},
    }


def test_a_claim_about_tables_before_training_gets_untrained_cells_in_its_later_rounds():
    study = RedGreenStudy(StudyConfig(families=(parse_family("learned"),)))
    spread = [0.0, -6.0, 6.0, -3.0, 3.0]  # the learned table's left/right probe before training: 55 ± 5, vs 60
    results = {
        Cell("learned", "direction", 1000, s): _run(1.0, 100.0, 99.0) | {"probes": _probes(0.55 + spread[s] / 100)}
        for s in range(5)
    }
    more = study.next_cells(results)  # the trained claims on these runs are decided; this one is not
    assert {(c.family, c.task, c.train_size) for c in more} == {("learned", "direction", UNTRAINED)}
    assert [c.seed for c in more] == list(range(5, 10))
    results |= {c: {"probes": _probes(0.54)} for c in more}
    claim = next(c for c in CLAIMS if c.statement == "a learned table has no relative bias before training")
    assert not claim.trains
    ((_, values, verdict),) = evaluate_claims(results, 1000, (), {"learned"}, (claim,), rule=RULE)
    assert sorted(values) == list(range(10)) and values[7] == pytest.approx(54.0)
    assert (verdict.outcome, verdict.round) == (REPRODUCED, 2) and study.next_cells(results) == []


def test_an_untrained_cell_probes_the_table_its_trained_twin_starts_from():
    config = tiny(families=(parse_family("fourier"),))
    trained, untrained = Cell("fourier", "direction", 64, 3), Cell("fourier", "direction", UNTRAINED, 3)
    out = run_cells([trained, untrained], config.families[0], config)
    assert out[untrained]["probes"]["before"] == out[trained]["probes"]["before"]
    assert set(out[untrained]) == {"probes", "seconds", "cpu_seconds"}  # nothing trained, nothing tested


def test_a_study_runs_its_rounds_and_resumes_them(tmp_path):
    config = tiny(families=(parse_family("learned"),), efficiency_sizes=(), rounds=2)  # 1 seed, then 2
    logs = []
    run_study(config, tmp_path, log=logs.append)
    results = json.loads((tmp_path / "results.json").read_text())
    later = [c for c in results["cells"] if c["seed"] == 1]
    assert later and results["finished_cells"] == 4 + len(later)  # one seed alone decides nothing
    assert any(line.startswith("round 2: ") for line in logs)
    assert all(v["n"] + v["failed"] <= 2 for v in results["verdicts"])
    logs.clear()
    run_study(config, tmp_path, log=logs.append)  # every round's runs are found, none trained again
    assert "4 training runs: 4 already done, 0 to go" in logs[0]
    assert not any(line.startswith("round 2: ") or line.startswith("[") for line in logs)
