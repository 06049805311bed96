"""The time budget of ``python -m bench.gpu --quick`` and the JSON file its rows go to as they come."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO


class Budget:
    """A wall-time budget cut into consecutive parts: each part ends at the sum of its share and all
    earlier shares, so time a part leaves unused goes to the later ones and none eats a later share."""

    def __init__(self, seconds: float, shares: dict[str, float], stream: TextIO | None = None) -> None:
        self.start = time.monotonic()
        self.seconds = seconds
        total = sum(shares.values())
        self.ends: dict[str, float] = {}
        elapsed = 0.0
        for part, share in shares.items():
            elapsed += seconds * share / total
            self.ends[part] = elapsed
        self.stream = stream

    def elapsed(self) -> float:
        """Seconds since the budget started."""
        return time.monotonic() - self.start

    def left(self, part: str | None = None) -> float:
        """Seconds left to ``part`` (None: to the whole budget); negative once spent."""
        end = self.seconds if part is None else self.ends[part]
        return end - self.elapsed()

    def progress(self, text: str) -> None:
        """One progress line on stderr: elapsed and left, then ``text``."""
        print(f"[{self.elapsed():6.1f} s elapsed, {self.left():6.1f} s left] {text}", file=self.stream or sys.stderr)


class RowLog:
    """Rows in a JSON file, rewritten atomically after every row, so a run cut short leaves every
    row measured before the cut; ``on_write`` gets the file's content after each write (e.g. to
    render a report from it)."""

    def __init__(
        self,
        path: Path,
        header: dict[str, Any],
        rows: list[dict[str, Any]] | None = None,
        on_write: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self.rows: list[dict[str, Any]] = list(rows or [])
        self.finished = False
        self.on_write = on_write
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    @classmethod
    def resume(cls, path: Path, on_write: Callable[[dict[str, Any]], None] | None = None) -> RowLog:
        """The log of ``path`` as another process left it, to add rows to."""
        data = json.loads(path.read_text())
        rows = data.pop("rows")
        data.pop("finished", None)
        return cls(path, data, rows, on_write)

    def add(self, row: dict[str, Any]) -> None:
        """Append ``row`` and rewrite the file."""
        self.rows.append(row)
        self._write()

    def finish(self) -> None:
        """Mark the file complete: every part ran or said why it did not."""
        self.finished = True
        self._write()

    def _write(self) -> None:
        data = {**self.header, "finished": self.finished, "rows": self.rows}
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(data, indent=1))
        os.replace(temporary, self.path)
        if self.on_write is not None:
            self.on_write(data)


def skip(log: RowLog, budget: Budget, part: str, what: str, reason: str) -> None:
    """A 'skipped' row for ``what`` of ``part``, and its progress line."""
    log.add({"part": part, "skipped": what, "reason": reason})
    budget.progress(f"{part}: skipped {what}: {reason}")


def spent(budget: Budget, log: RowLog, part: str, what: str) -> bool:
    """True (and a 'skipped' row for ``what``) if ``part``'s share of the budget is spent."""
    if budget.left(part) > 0:
        return False
    skip(log, budget, part, what, "its share of the time budget is spent")
    return True
