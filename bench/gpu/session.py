"""``python -m bench.gpu --session``: one GPU session in one command, timing first, within 540 seconds.

The parts (:func:`session_plan`), in order, each in a fresh process with a deadline (its share of
the total, plus what earlier parts left; the process is ended at the deadline):

1. ``terms-196``: every bucketed term on every path and variant at 196 tokens, the bare floor first,
   each compiled just before it is timed, first call and warm step apart (:mod:`bench.gpu.session_terms`);
2. ``terms-784``: the same at 784 tokens;
3. ``study``: the study's member steps/s and the projected study times (:mod:`bench.quick_ensemble`);
4. ``data``: the DeiT recipe's device-side augmentation and its data path end to end (:mod:`bench.gpu.quick_data`);
5. ``correctness``: every bucketed encoding on every path against float64, with the time left
   (:mod:`bench.gpu.check`).

Every row goes to ``--json`` as soon as it is measured and, with ``--out``, the file's "GPU session"
section is rewritten after every row, so a session cut short keeps what it measured.
``python -m bench.quick_report ROWS.json --table`` proposes the policy's rows from the JSON.
``--dry-run`` prints the plan, each part's budget and the total, and runs nothing (no CUDA needed).
This module imports no part: each part imports what it needs in its own process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION_SECONDS = 540.0
"""The session's limit: nine minutes of a GPU call, the machine's start aside."""
HEADING = "## GPU session"
DEFAULT_JSON = Path("runs/bench/gpu_session.json")
TERMS_SHARES = (200.0, 130.0)
"""Seconds of the first and second token count's terms parts (a third would get the second's)."""
OTHER_SHARES = {"study": 60.0, "data": 40.0, "correctness": 110.0}
RESERVE_S = 5.0
"""Seconds before a part's deadline at which it stops starting rows (a row in progress may finish)."""


@dataclass(frozen=True)
class Part:
    """One part of the session: its name, its share of the seconds, what it measures."""

    name: str
    seconds: float
    what: str
    tokens: int | None = None


PART_NAMES = ("terms", "study", "data", "correctness")
"""What ``--parts`` may name (``terms``: the terms parts at every token count)."""


def session_parts(text: str) -> tuple[str, ...]:
    """The session's parts named in comma-separated ``text`` (empty: all); a ValueError lists the valid names."""
    names = tuple(filter(None, text.split(",")))
    unknown = [n for n in names if n not in PART_NAMES]
    if unknown:
        raise ValueError(f"unknown session part {', '.join(map(repr, unknown))}; parts: {', '.join(PART_NAMES)}")
    return names


def session_plan(tokens: tuple[int, ...], total: float = SESSION_SECONDS, chosen: tuple[str, ...] = ()) -> list[Part]:
    """The parts in order (those ``chosen``, or all), their shares scaled to ``total`` seconds."""
    parts = [
        Part(f"terms-{t}", TERMS_SHARES[min(i, 1)], f"every bucketed term x every path at {t} tokens", t)
        for i, t in enumerate(tokens)
    ]
    parts += [
        Part("study", OTHER_SHARES["study"], "the study's member steps/s and projections"),
        Part("data", OTHER_SHARES["data"], "the DeiT recipe's augmentation and data path"),
        Part("correctness", OTHER_SHARES["correctness"], "every bucketed encoding on every path, with the time left"),
    ]
    parts = [p for p in parts if not chosen or p.name.split("-")[0] in chosen]
    scale = total / sum(p.seconds for p in parts)
    return [Part(p.name, p.seconds * scale, p.what, p.tokens) for p in parts]


def plan_lines(parts: list[Part], device: str) -> list[str]:
    """The plan as printed by ``--dry-run``: each part, its budget and what it times, and the total."""
    from .session_terms import term_plan

    lines = [f"python -m bench.gpu --session on {device}: {len(parts)} parts, each in a fresh process"]
    for i, part in enumerate(parts, start=1):
        lines.append(f"{i}. {part.name:<12} {part.seconds:5.0f} s  {part.what}")
        if part.tokens is not None:
            lines += [f"     {case.label} · {path}" for case, path in term_plan(part.tokens)]
    total = sum(p.seconds for p in parts)
    lines.append(f"total {total:.0f} s (limit {SESSION_SECONDS:.0f} s)")
    return lines


def part_command(argv: list[str], part: Part, seconds: float) -> list[str]:
    """The command line of one part's process: the session's arguments, the part and its seconds."""
    kept = [a for a in argv if a not in ("--session", "--dry-run")]  # a later --parts wins over the session's
    return [sys.executable, "-m", "bench.gpu", *kept, "--session-part", part.name, "--part-budget", f"{seconds:.1f}"]


def run_session(argv: list[str], parts: list[Part], json_path: Path, header: dict[str, Any], out: str) -> int:
    """Run every part in its own process within its seconds; 1 if a correctness row fails or a part failed."""
    from ..quick_log import RowLog

    print("\n".join(plan_lines(parts, header["device"])), file=sys.stderr, flush=True)
    RowLog(json_path, header, on_write=section_writer(out))
    start, end = time.monotonic(), 0.0
    status = 0
    for part in parts:
        end += part.seconds
        seconds = end - (time.monotonic() - start)
        if seconds <= RESERVE_S:
            _note(json_path, out, {"part": part.name, "skipped": part.what, "reason": "the session's time is spent"})
            continue
        code = _run_until(part_command(argv, part, seconds - RESERVE_S), seconds)
        if code is None:
            _note(json_path, out, {"part": part.name, "error": f"ended at its deadline ({seconds:.0f} s)"})
            continue
        if code not in (0, 1):  # 1: a correctness row failed, written as a row
            _note(json_path, out, {"part": part.name, "error": f"its process exited with status {code}"})
        status = max(status, min(code, 1))
    log = RowLog.resume(json_path, section_writer(out))
    log.finish()
    from .path_report import table_lines
    from .quick import summary

    print("\n".join(summary(log.rows)))
    paths = [r for r in log.rows if r["part"] == "overhead" and "path" in r and "overhead" in r]
    print("\n".join(table_lines(paths, f"{json_path} ({header['device']})")))
    return status


def _run_until(command: list[str], seconds: float) -> int | None:
    """Run ``command`` in a process group of its own; its exit status, or None where it was ended at the
    deadline (with every process it started: compile workers, data loaders)."""
    process = subprocess.Popen(command, start_new_session=True)
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None


def section_writer(out: str):
    """A callback that rewrites the session's section of ``out`` from the JSON's content (none without ``out``)."""
    if not out:
        return None

    def render(data: dict[str, Any]) -> None:
        from ..quick_report import write_section

        write_section(data, Path(out), HEADING)

    return render


def _note(json_path: Path, out: str, row: dict[str, Any]) -> None:
    from ..quick_log import RowLog

    RowLog.resume(json_path, section_writer(out)).add(row)
    print(f"[session] {row}", file=sys.stderr, flush=True)
