"""The detection study: claims computed from per-seed AP, a tiny run end to end, resuming, bad settings."""

import json

import pytest

from vitpos.study.cells import Cell
from vitpos.study.claims import evaluate_claims
from vitpos.study.detect import DETECT_CLAIMS, DetectStudyConfig
from vitpos.study.run import run_study
from vitpos.study.verdicts import CONTRADICTED, INCONCLUSIVE, REPRODUCED


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny detectors run faster on one thread where cores are shared."""


def results(aps: dict[str, list[float]]) -> dict:
    return {
        Cell(f, "detect", 100, s): {"test": v, "long": 0.0} for f, values in aps.items() for s, v in enumerate(values)
    }


def verdicts(aps):
    return {c.quantity: v.outcome for c, _, v in evaluate_claims(results(aps), 100, (), set(aps), DETECT_CLAIMS)}


def test_claims_follow_the_per_seed_gaps():
    outcome = verdicts({
        "sine": [40.0, 42.0, 41.0], "none": [20.0, 22.0, 19.0], "irpe_ctx": [45.0, 47.0, 46.0],
        "sine_irpe_ctx": [41.0, 42.5, 40.5], "sine_irpe_bias": [30.0, 29.0, 31.0],
        "sine_irpe_ctx_clip": [44.0, 45.0, 44.5],
    })  # fmt: skip
    assert outcome["sine - none AP, points"] == REPRODUCED
    assert outcome["sine - irpe_ctx AP, points"] == CONTRADICTED
    assert outcome["sine_irpe_ctx - sine AP, points"] == REPRODUCED
    assert outcome["sine_irpe_bias - sine AP, points"] == CONTRADICTED
    assert outcome["sine_irpe_ctx - sine_irpe_ctx_clip AP, points"] == CONTRADICTED


def test_claims_whose_families_did_not_run_are_left_out():
    outcome = verdicts({"sine": [40.0, 30.0], "none": [35.0, 36.0]})
    assert outcome == {"sine - none AP, points": INCONCLUSIVE}


def test_a_tiny_study_runs_reports_and_resumes(tmp_path):
    config = DetectStudyConfig(
        families=("sine", "none"), seeds=2, train_size=16, val_size=8, test_size=8, epochs=1, batch_size=8
    )
    lines = []
    report = run_study(config, tmp_path, log=lines.append)
    text = report.read_text()
    assert "sine - none AP, points" in text and "| sine | `detr_tiny_sine` |" in text
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["cells"]) == 4 and all(0 <= c["test"] <= 100 and "long" in c for c in data["cells"])
    assert [c["statement"] for c in data["claims"]] == ["DETR without a position encoding is far worse"]
    lines.clear()
    run_study(config, tmp_path, log=lines.append)
    assert lines[0].startswith("4 detection runs: 4 already done, 0 to go")
    with pytest.raises(ValueError, match="other settings"):
        run_study(DetectStudyConfig(families=("sine", "none"), seeds=2, train_size=32), tmp_path, log=lines.append)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown detection famil"):
        DetectStudyConfig(families=("sine", "learned"))
    with pytest.raises(ValueError, match="multiples of the stride 4"):
        DetectStudyConfig(long_size=30)
