"""The ensemble bench's --rate mode: its table, and the --full projection's arithmetic."""

import pytest

from bench.ensemble import main, projected_seconds

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_projection_adds_each_familys_steps_at_its_rate():
    assert projected_seconds({"a": 10.0, "b": 20.0}, {"a": 100, "b": 400, "c": 7}) == 30.0


def test_the_rate_table_runs_on_a_cpu_with_tiny_sizes(capsys):
    """One model and a stack of 10 (``--full``'s seeds) per family, iRPE included, then the projection."""
    args = ["--rate", "--families", "learned,irpe_product", "--members", "1,10", "--img-size", "16"]
    assert main([*args, "--batch", "2", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    for family in ("learned", "irpe_product"):
        assert out.count(f"| {family} | 1 |") == 2 and out.count(f"| {family} | 10 |") == 2  # progress and table
    assert "Projected `--full` training time of learned, irpe_product (" in out and out.rstrip().endswith("min")


def test_no_projection_without_a_stack_of_ten(capsys):
    main(["--rate", "--families", "none", "--members", "1,2", "--img-size", "16", "--batch", "2", "--steps", "1"])
    assert "No `--full` projection: --members lacks 10" in capsys.readouterr().out


def test_an_unknown_family_is_named():
    with pytest.raises(SystemExit, match="swin_relative are not families of the --full study"):
        main(["--rate", "--families", "none,swin_relative", "--members", "1"])
