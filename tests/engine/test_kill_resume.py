"""Kill a training process mid-epoch with SIGKILL, resume it, and check nothing was lost."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from vitpos.engine import load_training_checkpoint, train
from vitpos.weights import load_model

from .conftest import TINY_MODEL, tiny_request, without_times

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_sigkill_then_resume_finishes_the_same_run(tmp_path):
    run_dir = tmp_path / "run"
    options = dict(n=256, epochs=3, save_every=2)  # 8 steps per epoch
    request = tiny_request(**options)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY_MODEL, **request.train}.items() if k != "progress"]
    base = [sys.executable, "-m", "vitpos", "train", f"--run-dir={run_dir}", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [*base, "--model=thesis_vit", *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    pointer = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 120
    while not pointer.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert not (run_dir / "summary.json").exists()  # it died before finishing
    killed_at = load_training_checkpoint(run_dir).state
    assert killed_at["step"] < 24

    # everything but the run folder comes from the run's config.yaml
    resumed = subprocess.run([*base, "--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    final = load_training_checkpoint(run_dir)
    assert final.path.name == "step-00000024" and final.state["epoch"] == 3
    assert sorted(p.name for p in final.path.parent.iterdir()) == ["latest", "step-00000024"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2, 3]
    model, _ = load_model(run_dir)

    reference = train(*tiny_request(**options).resolve())
    assert without_times(rows) == without_times(reference.history)
    for p, q in zip(model.parameters(), reference.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)
