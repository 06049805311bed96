"""Two `vitpos train` processes on one run folder: the second stops at the lock, the first finishes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vitpos.engine import load_training_checkpoint
from vitpos.engine.run_lock import locked_run_folder

from .conftest import TINY_MODEL, tiny_request

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_a_second_process_on_the_same_folder_stops_with_the_lock_message(tmp_path):
    run_dir = tmp_path / "run"
    request = tiny_request(n=256, epochs=3)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY_MODEL, **request.train}.items() if k != "progress"]
    command = [
        sys.executable,
        "-m",
        "vitpos",
        "train",
        "--model=thesis_vit",
        *flags,
        f"--run-dir={run_dir}",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    # started together, both reach the lock within a moment of each other, long before either finishes
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [err[-2000:] for _, err in outputs]
    winner, loser = sorted(range(2), key=lambda k: procs[k].returncode)
    assert outputs[loser][1].strip() == (
        f"vitpos train: error: run folder {run_dir} is in use by another vitpos process (pid {procs[winner].pid}); "
        "wait for it to finish, or choose another --run-dir"
    )
    assert outputs[winner][0].count("epoch ") >= 3  # one line per epoch with --no-progress

    # the folder is the first run's, whole and consistent
    final = load_training_checkpoint(run_dir)
    assert final.state["epoch"] == 3 and final.path.name == "step-00000024"
    assert sorted(p.name for p in final.path.parent.iterdir()) == ["latest", "step-00000024"]
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["train"] == final.train_config and saved["model"] == final.model_config.to_dict()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2, 3] and rows == final.state["history"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["checkpoint"] == str(final.path)


def test_a_run_that_stops_before_writing_leaves_no_folder_it_made(tmp_path):
    """Not its run folder, nor the parents it created: a failed first `vitpos train` leaves no empty runs/."""
    with pytest.raises(RuntimeError, match="stopped"), locked_run_folder(tmp_path / "runs" / "a" / "run"):
        raise RuntimeError("stopped")
    assert not (tmp_path / "runs").exists()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "kept.txt").write_text("a user's file")
    with locked_run_folder(tmp_path / "runs" / "b"):
        pass
    assert os.listdir(tmp_path / "runs") == ["kept.txt"]  # a folder it did not make stays, and what it holds
