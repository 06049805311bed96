"""The segmentation study: its families and cells, claims computed from per-seed mIoU, the run-flag
rule, a tiny ``vitpos study --task segment`` end to end, bad settings."""

import json

import pytest

from vitpos.cli import main
from vitpos.study.cells import Cell
from vitpos.study.claims import evaluate_claims
from vitpos.study.dense import still_improving
from vitpos.study.segment import SEGMENT_CLAIMS, SEGMENT_FAMILIES, SegmentStudyConfig
from vitpos.study.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_CONVERGED, REPRODUCED


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny segmenters run faster on one thread where cores are shared."""


def test_families_are_table_13_rows_on_the_tiny_host():
    config = SegmentStudyConfig()
    assert [f.label for f in config.families] == list(SEGMENT_FAMILIES)
    models = {f.label: f.model_config(config.model) for f in config.families}
    position = {label: (m.position.absolute, m.position.conditional, m.head) for label, m in models.items()}
    assert position == {
        "learned": ("learned", "none", "cls"),
        "peg": ("none", "peg@0", "cls"),
        "gap": ("learned", "none", "gap"),
        "peg_gap": ("none", "peg@0", "gap"),
        "none": ("none", "none", "gap"),
    }
    assert {m.num_classes for m in models.values()} == {5} and {m.img_size for m in models.values()} == {32}
    assert {m.embed_dims for m in models.values()} == {(16, 32, 64, 128)}


def test_cells_run_seed_by_seed_over_the_chosen_families():
    config = SegmentStudyConfig(families=("peg", "none"), seeds=3, train_size=50)
    assert config.cells() == [Cell(family, "segment", 50, seed) for seed in range(3) for family in ("peg", "none")]


def results(mious: dict[str, list[float]], flagged: frozenset = frozenset()) -> dict:
    return {
        Cell(f, "segment", 100, s): {"test": v, "long": 0.0, "flagged": (f, s) in flagged}
        for f, values in mious.items()
        for s, v in enumerate(values)
    }


def verdicts(mious, flagged=frozenset()):
    judged = evaluate_claims(results(mious, flagged), 100, (), set(mious), SEGMENT_CLAIMS)
    return {c.quantity: v.outcome for c, _, v in judged}


def test_claims_follow_the_per_seed_gaps():
    outcome = verdicts({
        "learned": [80.0, 82.0, 81.0], "peg": [85.0, 86.0, 84.5], "gap": [90.0, 91.0, 90.5],
        "peg_gap": [84.5, 85.5, 84.0], "none": [70.0, 72.0, 71.0],
    })  # fmt: skip
    assert outcome == {
        "peg - learned mIoU, points": REPRODUCED,
        "peg_gap - gap mIoU, points": CONTRADICTED,
        "peg_gap - learned mIoU, points": REPRODUCED,
        "peg_gap - peg mIoU, points": REPRODUCED,  # 0.5 below, within the 1-point margin
        "gap - none mIoU, points": REPRODUCED,
        "peg_gap - none mIoU, points": REPRODUCED,
    }


def test_a_claim_resting_on_a_run_still_improving_is_not_converged_unless_reproduced():
    mious = {"learned": [80.0, 82.0, 81.0], "peg": [70.0, 71.0, 69.0], "none": [90.0, 60.0, 75.0]}
    assert verdicts(mious) == {"peg - learned mIoU, points": CONTRADICTED}
    assert verdicts(mious, frozenset({("peg", 1)})) == {"peg - learned mIoU, points": NOT_CONVERGED}
    mious["peg"] = [90.0, 91.0, 92.0]
    assert verdicts(mious, frozenset({("peg", 1)})) == {"peg - learned mIoU, points": REPRODUCED}
    assert verdicts({"gap": [80.0, 70.0], "none": [75.0, 76.0]}) == {"gap - none mIoU, points": INCONCLUSIVE}


@pytest.mark.parametrize(
    "curve,improving",
    [([50.0], False), ([50.0, 60.0], True), ([50.0, 60.0, 60.9], False), ([60.0, 58.0, 61.5], True), ([], False)],
)
def test_a_run_is_still_improving_when_its_last_epoch_beats_the_rest_by_a_point(curve, improving):
    assert still_improving(curve) is improving


def test_a_tiny_study_runs_from_the_command_line_and_resumes(tmp_path, capsys):
    argv = ["study", "--task", "segment", "--family", "peg_gap", "--family", "none"]
    small = ["--seeds", "2", "--epochs", "1", "--train-size", "32", "--workers", "1", "--out", str(tmp_path)]
    assert main([*argv, *small]) == 0
    assert "4 segmentation runs: 0 already done, 4 to go" in capsys.readouterr().out
    report = (tmp_path / "report.md").read_text()
    assert "# Segmentation study: CPVT Table 13" in report
    assert "| none | `pvt_tiny_gap_fpn` absolute=none |" in report and "| peg_gap | `pvt_tiny_peg_gap_fpn` |" in report
    assert "vitpos study --task segment --seeds 2 --epochs 1 --train-size 32 --family peg_gap --family none" in report
    figure = "figures/claims_cpvt_table_2_deit_tiny_on_table_13_s_host.png"
    assert f"]({figure})" in report and (tmp_path / figure).stat().st_size > 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["cells"]) == 4
    assert all(0 <= c["test"] <= 100 and 0 <= c["long"] <= 100 and len(c["val_curve"]) == 1 for c in data["cells"])
    assert [c["statement"] for c in data["claims"]] == ["no position encoding is worse than PEG"]
    assert main([*argv, *small]) == 0
    assert "4 segmentation runs: 4 already done, 0 to go" in capsys.readouterr().out


@pytest.mark.parametrize(
    "settings,message",
    [
        (
            {"families": ("peg", "sine")},
            "unknown segmentation famil(ies) sine; valid: learned, peg, gap, peg_gap, none",
        ),
        ({"img_size": 48}, "must be multiples of the stride 32"),
        ({"segment_task": "direction"}, "segment_task must be one of segment, segment_absolute"),
        ({"seeds": 0}, "seeds must be at least 1"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SegmentStudyConfig(**settings)


def test_the_command_refuses_the_red_green_options(tmp_path, capsys):
    assert main(["study", "--task", "segment", "--lr-grid", "0.001", "--out", str(tmp_path / "s")]) == 2
    assert "--task segment takes --seeds, --epochs" in capsys.readouterr().err
