"""Long commands draw a progress bar on stderr (none with --no-progress); ``--stage all`` skips a
stage too small for the analysis and writes the others."""

import contextlib
import io
import json
import re

import pytest

from vitpos.cli import main
from vitpos.progress import progress, progress_bar, showing_progress

from .test_analysis_commands import PYRAMID_ARGS, SMALL, TINY_ARGS


def test_progress_yields_every_item_and_draws_only_when_shown(capsys):
    assert list(progress(iter("abc"), "letters", total=3)) == ["a", "b", "c"]
    assert capsys.readouterr().err == ""
    with showing_progress():
        assert list(progress(range(4), "numbers")) == [0, 1, 2, 3]
    err = capsys.readouterr().err
    assert "numbers:   0%" in err and "0/4 [00:00<" in err  # a bar of 4 steps with its time left


@pytest.mark.parametrize(
    ("command", "bar"),
    [
        (["probe", "--absolute", "sincos2d"], "probe folds"),
        (["equivariance", "--absolute", "none", "--images", "2"], "equivariance sweep"),
        (["awareness", "--absolute", "sincos2d", "--images", "4", "--folds", "2"], "awareness folds"),
    ],
)
def test_long_commands_draw_a_bar_unless_told_not_to(command, bar, tmp_path, capsys):
    assert main([*command, *TINY_ARGS, "--out", str(tmp_path / "on")]) == 0
    err = capsys.readouterr().err
    assert f"{bar}:" in err and "%|" in err
    assert re.search(rf"{bar}: 100%.*? (\d+)/\1 ", err), err  # the last step is drawn, however fast
    assert main([*command, *TINY_ARGS, "--no-progress", "--out", str(tmp_path / "off")]) == 0
    assert capsys.readouterr().err == ""


def test_a_bar_ends_drawn_at_its_total_however_fast_its_steps(capsys):
    with showing_progress(), progress_bar(2, "two steps") as bar:
        bar.update()
        bar.update()
    assert re.search(r"two steps: 100%.* 2/2 ", capsys.readouterr().err)  # drawn before the bar is cleared


def test_every_analysis_command_takes_no_progress(capsys):
    commands = ("probe", "similarity", "attention", "equivariance", "awareness", "relative-bias", "eval", "pretrain-pe")
    for command in commands:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "--no-progress" in out and "--progress," not in out, command  # one spelling: train's own aside


def test_stage_all_skips_a_stage_too_small_and_writes_the_rest(tmp_path, capsys):
    args = ["probe", *PYRAMID_ARGS["pvt"], *SMALL, "--absolute", "sincos2d", "--no-progress"]
    assert main([*args, "--stage", "all", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "stage 3: skipped (grid 2x2 is too small to probe; use at least 6 cells)" in out
    result = json.loads((tmp_path / "probe.json").read_text())
    assert [result[k]["grid"] for k in result] == [[16, 16], [8, 8], [4, 4]]
    assert (tmp_path / "probe.png").is_file()


def test_the_one_stage_asked_for_being_too_small_is_an_error_that_writes_nothing(tmp_path, capsys):
    args = ["probe", *PYRAMID_ARGS["pvt"], *SMALL, "--absolute", "sincos2d", "--stage", "3"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    assert "grid 2x2 is too small to probe" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_lines_printed_under_a_bar_start_on_a_cleared_line_and_arrive_whole():
    terminal = io.StringIO()  # stdout and stderr on one screen
    with contextlib.redirect_stdout(terminal), contextlib.redirect_stderr(terminal), showing_progress():
        for i in progress(range(2), "rows"):
            print("row", i)
        print("tail", end="")
    text = terminal.getvalue()
    assert re.search(r"rows: .*\r +\rrow 0\n", text) and re.search(r"\r +\rrow 1\n", text)
    assert text.endswith("tail")
