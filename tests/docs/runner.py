"""Runs one block as a user would: shell commands with the installed ``vitpos``, Python in a fresh interpreter."""

import os
import subprocess
import sys
from pathlib import Path

import vitpos

from .blocks import REPO, Block, page_name
from .expectations import instrument
from .outputs import missing_lines

SRC = Path(vitpos.__file__).resolve().parents[1]
TIMEOUT_S = {"fast": 120, "slow": 600}


def _environment(tmp: Path) -> dict[str, str]:
    """``vitpos`` and ``python`` on the PATH as this interpreter, the package and ``bench`` importable, one
    thread, and a weights cache of the test's own (``VITPOS_OFFLINE``: nothing is downloaded)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, args in (("vitpos", "-m vitpos"), ("python", "")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args} "$@"\n')
        shim.chmod(0o755)
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join((str(SRC), str(REPO))),
        OMP_NUM_THREADS="1",
        VITPOS_OFFLINE="1",
        VITPOS_CACHE=str(tmp / "cache"),
        MPLBACKEND="Agg",
    )
    return env


def console_parts(text: str) -> tuple[str, str]:
    """A ```console block's commands (the ``$ `` lines) and the output it shows (every other line)."""
    commands, shown = [], []
    for line in text.splitlines():
        (commands if line.startswith("$ ") else shown).append(line.removeprefix("$ "))
    return "\n".join(commands) + "\n", "\n".join(shown)


def run_block(block: Block, tmp: Path) -> str:
    """Run the block (after what it needs) in ``tmp``, or in the repository for ``cwd=repo``; return its output."""
    work = tmp / "work"
    work.mkdir()
    env = _environment(tmp)
    cwd = REPO if block.cwd == "repo" else work
    timeout = TIMEOUT_S[block.kind]
    _prepare(block, tmp, cwd, env, timeout)
    printed = _run(_command(block, tmp), cwd, env, timeout, block.where)
    # a shortened run (--epochs 1) whose warm-up covers it teaches the reader to ignore a warning
    assert "is at least the run's" not in printed, f"{block.where}: the warm-up covers the run; add --warmup-epochs 0"
    checks = [(out.text, out.tol) for out in block.outputs if out.kind == "output"]
    if block.lang == "console":
        checks.append((console_parts(block.source())[1], block.tol))
    for text, tol in checks:
        missing = missing_lines(text, printed, tol)
        assert not missing, f"{block.where}: the page quotes lines the command did not print: {missing}\n{printed}"
    return printed


def _command(block: Block, tmp: Path) -> list[str]:
    """The command that runs a block: bash for shell lines, this interpreter for Python with its checks."""
    source = block.source()
    if block.lang == "python":
        script = tmp / f"block-{block.line}.py"
        script.write_text(instrument(source, page_name(block.page), block.line + 1))
        return [sys.executable, str(script)]
    commands = console_parts(source)[0] if block.lang == "console" else source
    return ["bash", "-euo", "pipefail", "-c", commands]


def _prepare(block: Block, tmp: Path, cwd: Path, env: dict[str, str], timeout: int) -> None:
    """Run what the block needs first: the block it continues (with that block's own needs), then its setup."""
    if block.continues is not None:
        _prepare(block.continues, tmp, cwd, env, timeout)
        _run(_command(block.continues, tmp), cwd, env, timeout, f"{block.where} (continuing {block.continues.where})")
    if block.setup:
        _run(["bash", "-euo", "pipefail", "-c", block.setup], cwd, env, timeout, f"{block.where} (setup)")


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: int, where: str) -> str:
    """Run a command; its combined output, or a failure naming the block, the exit status and the output."""
    done = subprocess.run(
        command, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 0, f"{where} exited with status {done.returncode}:\n{printed[-4000:]}"
    return printed
