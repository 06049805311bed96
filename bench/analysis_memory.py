"""``python -m bench.analysis_memory``: the peak memory of each analysis command on full-size hosts.

Runs ``vitpos probe``, ``similarity`` and ``attention`` with ``--stage all`` on ``pvt_tiny``,
``swin_tiny --absolute sincos2d`` and ``deit_small_patch16_224`` (224x224 images: 56x56 first
stages on the pyramids), each in its own process under ``/usr/bin/time -v``, and reports the
process's maximum resident set size (everything: Python, torch, matplotlib, the model) against
the 2 GiB budget. Memory, not time, is the measure, so a busy machine does not change it much.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .report import machine

MODELS = {
    "pvt_tiny": [],
    "swin_tiny": ["--absolute", "sincos2d"],
    "deit_small_patch16_224": [],
}
COMMANDS = ("probe", "similarity", "attention")
BUDGET_MIB = 2048


def peak_rss_mib(argv: list[str]) -> tuple[float, float]:
    """Maximum resident set size (MiB) and wall time (s) of ``python -m vitpos ARGV`` under ``/usr/bin/time -v``."""
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "vitpos", *argv], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"vitpos {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    kib = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr)
    assert kib is not None and wall is not None, "GNU time -v reports both"
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(wall.group(1).split(":"))))
    return int(kib.group(1)) / 1024, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.analysis_memory", description=__doc__)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated presets of MODELS")
    p.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated analysis commands")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for model in args.models.split(","):
            for command in args.commands.split(","):
                argv_ = [command, "--model", model, *MODELS[model], "--stage", "all", "--out", str(Path(out) / command)]
                mib, seconds = peak_rss_mib(argv_)
                verdict = "met" if mib <= BUDGET_MIB else "MISSED"
                rows.append(
                    f"| `vitpos {' '.join(argv_[:-2])}` | {mib:,.0f} MiB | {verdict} (≤ 2 GiB) | {seconds:.0f} s |"
                )
                print(rows[-1], flush=True)
    print(f"\n- Machine: {machine()}\n- Command: `python -m bench.analysis_memory`\n")
    print("| command | peak resident memory | target | wall time (shared machine) |\n| --- | --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
