"""`vitpos eval` on data with another class count: the error names what evaluates the checkpoint."""

from vitpos.cli import main

from .test_train_eval import DATA, FAST, MODEL

OTHER = "synthetic:direction4:img=16:square=4:train=128:val=64:test=64"


def test_eval_on_other_classes_names_the_fix_that_works(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", *MODEL, f"--data={DATA}", *FAST, f"--run-dir={run_dir}"]) == 0
    capsys.readouterr()
    assert main(["eval", f"--checkpoint={run_dir}", f"--data={OTHER}"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vitpos eval: error: "), lines
    assert f"num_classes=2 but {OTHER} has 4 classes" in lines[0]
    assert (
        f"evaluate checkpoint {run_dir} on data with 2 classes (without --data: the data it was trained on)" in lines[0]
    )
    assert f"vitpos train --init {run_dir} --model NAME --data {OTHER} gives it a new head" in lines[0]
    assert "--num-classes" not in lines[0] and captured.out == ""
    assert not list(run_dir.glob("eval*"))
    # the fixes it names work: its own data, and a run fine-tuned from it on the other data
    assert main(["eval", f"--checkpoint={run_dir}"]) == 0
    tuned = tmp_path / "tuned"
    assert main(["train", f"--init={run_dir}", *MODEL, f"--data={OTHER}", *FAST, f"--run-dir={tuned}"]) == 0
    assert main(["eval", f"--checkpoint={tuned}"]) == 0
