"""A run at chance says so: the rule (accuracy within 10 points of 100 / classes, R² below 0.1) and
`vitpos train`'s last line."""

import re

import pytest

from vitpos.cli import main
from vitpos.study.convergence import at_chance as study_at_chance
from vitpos.tasks.chance import at_chance, best_validation, chance_note

from ..engine.conftest import TINY_MODEL


def history(metric: str, *values: float | None) -> list[dict]:
    return [{"epoch": i, f"val_{metric}": v} for i, v in enumerate(values)]


def test_the_best_validation_result_is_judged_against_the_class_count():
    assert best_validation(history("acc1", 20.0, None, 31.0, 28.0), "acc1") == 31.0
    assert best_validation(history("acc1", None), "acc1") is None
    assert chance_note(history("acc1", 24.6, 34.9), "acc1", 4) == (
        "at chance: its best validation acc1 34.9% is within 10 points of chance (25% for 4 classes)"
    )
    assert chance_note(history("acc1", 24.6, 35.0), "acc1", 4) is None  # ten points above: it learned something
    assert (
        chance_note(history("acc1", 59.0), "acc1", 2) is not None
        and chance_note(history("acc1", 61), "acc1", 2) is None
    )
    assert chance_note(history("r2", -0.2, 0.09), "r2", 2) == "at chance: its best validation R² 0.090 is below 0.1"
    assert chance_note(history("r2", 0.5), "r2", 2) is None
    assert chance_note(history("AP", 0.0), "AP", 3) is None  # no chance level for a detector's AP
    assert chance_note([{"epoch": 0}], "acc1", 2) is None  # nothing evaluated, nothing said


@pytest.mark.parametrize(
    "metric,value,classes", [("acc1", 34.9, 4), ("acc1", 35.0, 4), ("r2", 0.099, 2), ("r2", 0.1, 2)]
)
def test_the_study_flags_by_the_same_rule(metric, value, classes):
    assert study_at_chance(metric, value, classes) is at_chance(metric, value, classes)


def test_a_train_run_at_chance_says_so_in_its_last_line(tmp_path, capsys):
    model = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.items()]
    data = "synthetic:direction4:img=16:train=64:val=64:test=64"
    options = ["--epochs=1", "--batch-size=32", "--lr=1e-6", "--min-lr=0", "--warmup-epochs=0", "--no-progress"]
    assert main(["train", "--model=thesis_vit", *model, f"--data={data}", *options, f"--run-dir={tmp_path}/r"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"run folder {tmp_path}/r: test loss \S+  acc1 \S+%; at chance: its best validation acc1 [\d.]+% is within 10 "
        r"points of chance \(25% for 4 classes\)",
        last,
    ), last
