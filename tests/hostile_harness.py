"""How a hostile-data row is run and judged (tests/test_hostile_data.py, tests/test_hostile_shards.py).

A row is a bad input and the answer it must get: a command line exits with status 2 and one
error line (a Python call raises :class:`VitposError`) whose message matches the row's pattern;
a warning row runs on (status 0) and prints its warning; a row answered by a behaviour exits
with its status and prints what the pattern says. Every row also checks that the files it was
given are left exactly as they were, and that it ends within seconds (a watchdog calls a case
that runs past :data:`WATCHDOG_S` a hang). The outcome is recorded for ``tests/hostile_census.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from vitpos.cli import main
from vitpos.errors import VitposError

__all__ = ["WATCHDOG_S", "Case", "run_row"]

WATCHDOG_S = 60
"""A case still running after this long is a hang (they all end in a few seconds)."""


@dataclass
class Case:
    """One hostile input: a command line or a Python call, its environment, and the files it must not touch."""

    argv: list[str] | None = None
    call: Callable[[], object] | None = None
    env: dict[str, str] = field(default_factory=dict)
    guarded: list[Path] = field(default_factory=list)
    warns: bool = False
    """A warning row: the command runs on (status 0) and prints the warning."""
    answer: int | None = None
    """A row answered by a behaviour: the command ends with this status, its output (stdout and stderr) matching
    the pattern."""
    after: Callable[[], bool] = lambda: True
    """What must hold once the command has ended (e.g. no temporary folder left)."""
    within: Callable[[], AbstractContextManager] = contextlib.nullcontext
    """The conditions the case runs under (e.g. an address-space limit)."""
    judge: Callable[[], tuple[str, str]] | None = None
    """A case run another way (a child process sent a signal): its outcome and message."""


def _contents(paths: list[Path]) -> dict[str, str]:
    """Every file (and folder) under ``paths``, with a hash of its bytes; sparse files by their size."""
    found: dict[str, str] = {}
    for root in paths:
        for p in [root, *root.rglob("*")] if root.is_dir() else [root]:
            if p.is_symlink():
                found[str(p)] = f"link to {p.readlink()}"
            elif p.is_dir():
                found[str(p)] = "folder"
            elif p.is_file():
                stat = p.stat()
                sparse = stat.st_blocks * 512 < stat.st_size // 2
                found[str(p)] = f"sparse {stat.st_size}" if sparse else hashlib.sha256(p.read_bytes()).hexdigest()
    return found


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang


def _judge_command(case: Case, pattern: str, capsys) -> tuple[str, str]:
    assert case.argv is not None
    try:
        status = main(case.argv)
    except SystemExit as stop:  # argparse: usage line, then the error; a signal turned into an exit
        status = stop.code
    said = capsys.readouterr()
    err = said.err
    if case.answer is not None:
        both = said.out + said.err
        if "Traceback" in both or "internal error" in both:
            return "traceback", both
        return ("clear" if status == case.answer and re.search(pattern, both) else "silent"), both
    if case.warns:
        clear = status == 0 and re.search(pattern, err) is not None
        return ("clear" if clear else "silent" if status == 0 else "unclear"), err
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    if status == 0:
        return "silent", err
    if status != 2 or "Traceback" in err:
        return "traceback", err
    one_line = bool(lines) and lines[-1].startswith(("vitpos", "usage")) and ": error: " in lines[-1]
    return ("clear" if one_line and re.search(pattern, " ".join(lines)) else "unclear"), err


def _outcome(case: Case, pattern: str, capsys) -> tuple[str, str]:
    """Run ``case``: clear, unclear, traceback, silent or hang, and the message it gave."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WATCHDOG_S)
    try:
        with case.within():
            return _run(case, pattern, capsys)
    except _Hang:
        return "hang", f"still running after {WATCHDOG_S} s"
    finally:
        signal.alarm(0)


def _run(case: Case, pattern: str, capsys) -> tuple[str, str]:
    if case.judge is not None:
        return case.judge()
    if case.call is None:
        return _judge_command(case, pattern, capsys)
    try:
        case.call()
        return "silent", "accepted without an error"
    except VitposError as err:
        return ("clear" if re.search(pattern, str(err)) else "unclear"), str(err)
    except _Hang:
        raise
    except Exception as err:
        return "traceback", f"{type(err).__name__}: {err}"


def run_row(build: Callable[[Path], Case], pattern: str, tmp_path: Path, monkeypatch, capsys, record_property) -> None:
    """Build the row's case in ``tmp_path``, run it, record its outcome and assert that it is clear."""
    case = build(tmp_path)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    if "VITPOS_OFFLINE" not in case.env:
        monkeypatch.delenv("VITPOS_OFFLINE", raising=False)
    before = _contents(case.guarded)
    outcome, message = _outcome(case, pattern, capsys)
    if outcome != "hang" and (_contents(case.guarded) != before or not case.after()):
        outcome = "lost"
    record_property("outcome", outcome)  # read by tests/hostile_census.py
    assert outcome == "clear", message
