"""The fused kernels' tests (``tests/attention/triton``), each file in a process that runs Triton's interpreter."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).parent / "triton"
ROOT = FOLDER.parents[2]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (pip install -e '.[dev]')")
@pytest.mark.parametrize("module", sorted(p.name for p in FOLDER.glob("test_*.py")))
def test_kernels_in_the_interpreter(module):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-m",
        "not slow",
        str(FOLDER / module),
    ]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, summary
