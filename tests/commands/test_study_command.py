"""``vitpos study`` on the command line: options, worker processes, the reproduce line, --fresh."""

import json

import pytest

from vitpos.cli import main

SMALL = [
    *("--seeds", "1", "--rounds", "1", "--epochs", "2", "--patience", "1", "--lr-grid", "0.003"),
    *("--train-size", "128", "--efficiency-sizes", "64", "--resolutions", "32"),
]


def test_study_in_two_worker_processes(tmp_path, capsys):
    out = tmp_path / "study"
    assert (
        main(
            [
                "study",
                "--family",
                "sincos2d",
                "--family",
                "pegc: absolute=none conditional=peg@-1:pad=circular",
                *SMALL,
                "--workers",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    log = capsys.readouterr().out
    # sincos2d gets the learning curves (thesis Fig. 3), pegc does not; absolute and colour shift share a model
    assert "10 training runs: 0 already done, 10 to go in 8 jobs, 2 at a time on cpu" in log and "[  10/10]" in log
    report = (out / "report.md").read_text()
    assert "| pegc | `absolute=none, conditional=peg@-1:pad=circular` |" in report
    assert "--family 'pegc: absolute=none conditional=peg@-1:pad=circular'" in report  # how to reproduce it
    assert "--patience 1 --lr-grid 0.003" in report and "- learning rate: 0.003 for every family and task" in report
    assert "rate trial" not in log and not (out / "rates.json").exists()  # a grid of one rate is no choice
    results = json.loads((out / "results.json").read_text())
    assert results["finished_cells"] == 10 and {cell["lr"] for cell in results["cells"]} == {0.003}

    assert main(["study", "--family", "sincos2d", *SMALL, "--workers", "1", "--out", str(out)]) == 0
    assert "6 training runs: 6 already done, 0 to go" in capsys.readouterr().out


def test_fresh_deletes_nothing_while_the_folder_holds_files_the_study_did_not_write(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["study", "--family", "sincos2d", *SMALL, "--fresh", "--out", str(tmp_path)]) == 2
    assert "also holds notes.txt, which it did not write" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--family", "sinusoidal"], "unknown family 'sinusoidal'; built-in families: none, learned"),
        (["--family", "x: absolute=sinusoid"], "absolute=sinusoid names no registered absolute encoding; valid: "),
        (["--family", "x: conditional=peg@3"], "family 'x' cannot be built on the study model"),
        (["--family", "x: host=deit"], "unknown host 'deit'; study hosts: vit, pvt, swin"),
        (["--family", "x: host=swin depths=1,1,1"], "family 'x' cannot be built on the study's swin host"),
        (["--seeds", "0"], "seeds must be at least 1, got 0"),
    ],
)
def test_bad_input_is_a_clear_error(argv, message, tmp_path, capsys):
    assert main(["study", *argv, "--out", str(tmp_path / "s")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()  # refused before anything is written


def test_a_folder_of_another_protocol_is_refused(tmp_path, capsys):
    (tmp_path / "study.json").write_text(json.dumps({"train_size": 5000, "families": {}}))
    assert main(["study", "--family", "sincos2d", *SMALL, "--out", str(tmp_path)]) == 2
    assert "holds a study with other settings" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["1,a", "x"])
def test_bad_sizes(value, capsys):
    with pytest.raises(SystemExit):
        main(["study", "--efficiency-sizes", value])
    assert "comma-separated integers" in capsys.readouterr().err


def test_report_only_needs_a_finished_study(tmp_path, capsys):
    assert main(["study", "--report-only", "--out", str(tmp_path)]) == 2
    assert "results.json does not exist: run the study" in capsys.readouterr().err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message where CUDA is absent")
def test_cuda_without_a_gpu_is_a_clear_error(tmp_path, capsys):
    assert main(["study", "--device", "cuda", "--out", str(tmp_path / "s")]) == 2
    assert "no CUDA device is available here" in capsys.readouterr().err


def test_report_writing_draws_a_bar_on_stderr_unless_told_not_to(tmp_path, capsys):
    out = tmp_path / "study"
    assert main(["study", "--family", "sincos2d", *SMALL, "--workers", "1", "--no-progress", "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    report = (out / "report.md").read_text()
    assert main(["study", "--report-only", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "study report figures:" in printed.err and "5/5" in printed.err and "%|" in printed.err
    assert "study report" not in printed.out and (out / "report.md").read_text() == report
    assert main(["study", "--report-only", "--no-progress", "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
