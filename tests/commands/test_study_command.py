"""``vitpos study`` on the command line: options, worker processes, the reproduce line, --fresh."""

import json

import pytest

from vitpos.cli import main

SMALL = ["--seeds", "1", "--epochs", "1", "--train-size", "128", "--efficiency-sizes", "64", "--resolutions", "32"]


def test_study_in_two_worker_processes(tmp_path, capsys):
    out = tmp_path / "study"
    assert main(["study", "--family", "sincos2d", "--family", "pegc: absolute=none conditional=peg@-1:pad=circular",
                 *SMALL, "--workers", "2", "--out", str(out)]) == 0
    log = capsys.readouterr().out
    assert "12 training runs: 0 already done, 12 to go, 2 at a time" in log and "[  12/12]" in log
    report = (out / "report.md").read_text()
    assert "| pegc | `absolute=none, conditional=peg@-1:pad=circular` |" in report
    assert "--family 'pegc: absolute=none conditional=peg@-1:pad=circular'" in report  # how to reproduce it
    assert json.loads((out / "results.json").read_text())["finished_cells"] == 12

    assert main(["study", "--family", "sincos2d", *SMALL, "--workers", "1", "--out", str(out)]) == 0
    assert "6 training runs: 6 already done, 0 to go" in capsys.readouterr().out


def test_fresh_only_deletes_a_study_folder(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["study", "--family", "sincos2d", *SMALL, "--fresh", "--out", str(tmp_path)]) == 2
    assert "refuses to delete" in capsys.readouterr().err and (tmp_path / "notes.txt").exists()


def test_bad_family_is_a_clear_error(capsys):
    assert main(["study", "--family", "sinusoidal"]) == 2
    assert "unknown family 'sinusoidal'; built-in families: none, learned" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["1,a", "x"])
def test_bad_sizes(value, capsys):
    with pytest.raises(SystemExit):
        main(["study", "--efficiency-sizes", value])
    assert "comma-separated integers" in capsys.readouterr().err
