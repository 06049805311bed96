"""The ensemble bench's --rate mode on a CPU: its tables, the stacks in flight, the --full projection."""

import pytest

from bench.ensemble import main

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--rate", "--img-size", "16", "--batch", "2", "--iters", "1", "--repeats", "1"]


def test_the_rate_table_runs_on_a_cpu_with_tiny_sizes(capsys):
    """One model and a stack of 2 per family, iRPE included, stacks in flight, then the projection."""
    assert main([*TINY, "--families", "learned,irpe_product", "--members", "1,2", "--in-flight", "1,2"]) == 0
    out = capsys.readouterr().out
    for family in ("learned", "irpe_product"):
        assert (
            out.count(f"| {family} | 1 | off |") == 2 and out.count(f"| {family} | 2 | off |") == 2
        )  # progress, table
    assert "| 2 | one after another (no streams on a CPU) |" in out
    assert "Nothing ran in flight (streams need CUDA; --processes times processes)." in out
    assert "Projected `--full` training time of learned, irpe_product (compile off; every stack at its cap" in out
    assert out.rstrip().endswith("min one stack at a time")


def test_an_unknown_family_is_named():
    with pytest.raises(SystemExit, match="swin_relative are not families of the --full study"):
        main(["--rate", "--families", "none,swin_relative", "--members", "1"])
