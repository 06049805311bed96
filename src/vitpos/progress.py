"""Progress bars of long commands: tqdm on stderr with a time estimate, drawn only under a
``vitpos`` command that did not get ``--no-progress`` (library calls stay silent)."""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, redirect_stdout
from typing import Any, TextIO, TypeVar

__all__ = ["progress", "progress_bar", "showing_progress"]

T = TypeVar("T")

_SHOWN = contextvars.ContextVar("vitpos_progress_shown", default=False)


class _AboveBars:
    """Standard output that writes whole lines, lifting the bars on stderr out of the way of each,
    so a printed line never lands on a bar's line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream, self._pending = stream, ""

    def write(self, text: str) -> int:
        lines, newline, self._pending = (self._pending + text).rpartition("\n")
        if newline:
            self._emit(lines + newline)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""
        self._stream.flush()

    def _emit(self, text: str) -> None:
        from tqdm import tqdm

        with tqdm.external_write_mode(file=sys.stderr):
            self._stream.write(text)
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def showing_progress(shown: bool = True) -> Iterator[None]:
    """Within the block, :func:`progress` and :func:`progress_bar` draw their bars (``shown=False``: they do not)
    and what is printed meanwhile goes above them."""
    token = _SHOWN.set(shown)
    try:
        if shown:
            above = _AboveBars(sys.stdout)
            with redirect_stdout(above):
                yield
            above.flush()
        else:
            yield
    finally:
        _SHOWN.reset(token)


@functools.cache
def _bar_class() -> type:
    """tqdm whose last frame is drawn before the bar goes: a fast last step still shows as done."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        def close(self) -> None:
            if not self.disable and self.n != self.last_print_n:
                self.refresh()  # updates within tqdm's redraw interval are otherwise never drawn
            super().close()

    return Bar


def progress_bar(total: int | None, what: str, unit: str = "step") -> Any:
    """A tqdm bar named ``what`` (``update()`` it as work is done), disabled where progress is not shown."""
    return _bar_class()(
        total=total,
        desc=what,
        unit=unit,
        leave=False,
        dynamic_ncols=True,
        file=sys.stderr,
        disable=not _SHOWN.get(),
    )


def progress(items: Iterable[T], what: str, total: int | None = None, unit: str = "step") -> Iterator[T]:
    """``items`` one by one, drawn as a bar named ``what`` with the time left when progress is shown."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress_bar(total, what, unit) as bar:
        for item in items:
            yield item
            bar.update()
