"""Part (vii) of ``python -m bench.gpu --quick`` on the CPU: its rows and its projections' arithmetic."""

import dataclasses
import json

import pytest
import torch

from bench import gpu
from bench.dense_cost import DENSE, protocol_steps
from bench.ensemble_rate import SEQUENTIAL, Fit, all_members, fit, full_stacks, projected_seconds
from bench.quick_report import render
from vitpos.study.protocol import StudyConfig

from .test_gpu_quick import TINY_ARGS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_full_studys_stacks_hold_every_seed_task_and_size():
    """At --full a family trains one stack of 90 runs (10 seeds x 3 training tasks at 5000 images, x 2 curve tasks
    at each of 3 smaller sizes), each with its twin on the longer cap: 180 members, as long as its longest
    first cap (30 epochs of 78 steps; the smaller sets' caps are 300 x 7, 150 x 15 and 75 x 31), its 12 rate
    trials and their twins, and a pretrained one two single models. Without the longer cap, no twins."""
    full = StudyConfig.full()
    assert full_stacks(full, "learned") == [(180, 30 * 78), (24, 30 * 78)]
    assert full_stacks(full, "fourier_pretrained")[-2:] == [(1, 30 * 78), (1, 30 * 78)]
    assert all_members(full, "learned") == 180
    assert all_members(dataclasses.replace(full, extend=1), "learned") == 90


def test_the_fit_and_the_projection_add_up():
    line = fit({1: 1 / 0.011, 10: 10 / 0.02, 30: 30 / 0.04})  # 10 ms to launch, 1 ms per member
    assert line.launch == pytest.approx(0.01) and line.per_member == pytest.approx(0.001)
    assert fit({1: 100.0, 10: 500.0, 30: 1000.0}).seconds(0) > 0.01  # not collinear: least squares
    assert fit({4: 40.0}) == Fit(0.0, 0.025)
    config = StudyConfig(families=StudyConfig().families[:1], lr_grid=(), efficiency_families=())
    (stack,) = full_stacks(config, "none")
    assert stack == (30, 20 * 31)  # 5 seeds x 3 tasks, each with its longer twin; 20 epochs of 31 steps
    assert projected_seconds({"none": Fit(1.0, 0.5)}, config, 2.0) == pytest.approx(620 * 16 / 2)


def test_the_part_runs_on_the_cpu(tmp_path):
    path = tmp_path / "quick.json"
    args = [*TINY_ARGS, "--parts", "ensemble", "--ensemble-members", "1,2", "--json", str(path)]
    assert gpu.main(args) == 0
    rows = json.loads(path.read_text())["rows"]
    rates = [r for r in rows if "member_steps_per_s" in r and "stacks" not in r]
    assert [(r["family"], r["members"]) for r in rates[:2]] == [("learned", 1), ("learned", 2)]
    assert {r["family"] for r in rates} == {f.label for f in StudyConfig().families}  # the others at 2
    assert all(r["member_steps_per_s"] > 0 and r["compile"] == "off" and r["batch"] == 2 for r in rates)
    flight = [r for r in rows if "stacks" in r]
    assert [r["stacks"] for r in flight] == [1, 2, 4] and {r["how"] for r in flight} == {SEQUENTIAL}
    (projection,) = [r for r in rows if r.get("projection")]
    assert projection["of"] == 9 and len(projection["families"]) == 9 and projection["in_flight_gain"] == 1.0
    dense = {r["task"]: r for r in rows if "task" in r}
    assert set(dense) == set(DENSE) and all(dense[t]["steps"] == protocol_steps(DENSE[t]()) for t in DENSE)
    assert all(r["measured_batch"] == 2 and r["step_ms"] >= 0 for r in dense.values())
    assert rows[-1] == {"part": "ensemble", "skipped": "the compiled step (default)", "reason": "--no-compile"}
    text = render(json.loads(path.read_text()))
    section = text[text.index("### The study's stacked ensembles") :]
    assert (
        "| learned | 2 | off | " in section and "- projected --full training (9 of 9 families, compile off)" in section
    )
    assert all(f"- projected `--task {t}`: " in section for t in DENSE)
    assert torch.get_num_threads() == 1
