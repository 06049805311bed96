"""A run that diverges stops with an error and a finite checkpoint; Ctrl-C stops with one line and resumes."""

import math
import os
import signal
import sys

import pytest
import torch

from vitpos.cli import main
from vitpos.engine import load_training_checkpoint, train
from vitpos.engine.divergence import TrainingDiverged
from vitpos.engine.interrupt import TrainingInterrupted
from vitpos.weights import load_model

from .conftest import TINY_MODEL, tiny_request, without_times

TRAIN_MODULE = sys.modules["vitpos.engine.train"]  # the package exports the function under the same name
MODEL = ["--model=thesis_vit", *(f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.items())]
DATA = "--data=synthetic:direction:img=16:train=64:val=32:test=32"
FAST = ["--batch-size=32", "--warmup-epochs=0", "--no-progress"]


def test_a_diverging_run_exits_non_zero_naming_the_step_and_keeps_a_finite_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    status = main(["train", *MODEL, DATA, *FAST, "--epochs=3", "--lr=1e6", f"--run-dir={run_dir}"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert "training diverged: the training loss was nan at step " in err
    assert "Lower --lr (now 1e+06)" in err and "--grad-clip" in err
    step = int(err.split(" at step ")[1].split(";")[0])
    kept = load_training_checkpoint(run_dir)
    assert kept.state["step"] < step and f"last finite checkpoint is kept: {kept.path}" in err
    model, _ = load_model(run_dir)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_divergence_from_python_is_an_error_with_the_step_and_the_loss():
    with pytest.raises(TrainingDiverged, match=r"loss was nan at step \d+; .*nothing was saved") as caught:
        train(*tiny_request(n=64, epochs=3, lr=1e6).resolve())
    assert caught.value.step >= 1 and math.isnan(caught.value.loss)


def _sigint_before_step(monkeypatch, at: int) -> None:
    """Send this process SIGINT while optimiser step ``at`` (0-based) is running."""
    real = TRAIN_MODULE.step_seed

    def seed(seed: int, step: int, rank: int) -> int:
        if step == at:
            os.kill(os.getpid(), signal.SIGINT)
        return real(seed, step, rank)

    monkeypatch.setattr(TRAIN_MODULE, "step_seed", seed)


def test_ctrl_c_prints_one_line_and_the_command_it_names_continues_the_same_run(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    options = dict(n=128, epochs=2)  # 4 steps per epoch: stop in the middle of the first
    request = tiny_request(**options)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY_MODEL, **request.train}.items() if k != "progress"]
    _sigint_before_step(monkeypatch, 1)
    assert main(["train", "--model=thesis_vit", *flags, "--no-progress", f"--run-dir={run_dir}"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"vitpos train: interrupted at step 2; `vitpos train --run-dir {run_dir} --resume` continues"]
    assert load_training_checkpoint(run_dir).state["step"] == 2

    monkeypatch.undo()
    command = err[0].split("`")[1].split()[1:]
    assert main(command) == 0, capsys.readouterr().err
    model, _ = load_model(run_dir)
    reference = train(*tiny_request(**options).resolve())
    assert without_times(load_training_checkpoint(run_dir).state["history"]) == without_times(reference.history)
    for p, q in zip(model.parameters(), reference.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def test_ctrl_c_from_python_raises_keyboard_interrupt_with_the_step(tmp_path, monkeypatch):
    before = signal.getsignal(signal.SIGINT)  # Python's default handler, or SIG_IGN in a job started with `&`
    _sigint_before_step(monkeypatch, 0)
    with pytest.raises(TrainingInterrupted, match=r"interrupted at step 1; checkpoint .*step-00000001 holds it") as hit:
        train(*tiny_request(n=128, epochs=1, run_dir=str(tmp_path / "run")).resolve())
    assert isinstance(hit.value, KeyboardInterrupt) and hit.value.step == 1
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
