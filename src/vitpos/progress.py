"""Progress bars of long commands: tqdm on stderr with a time estimate, drawn only under a
``vitpos`` command that did not get ``--no-progress`` (library calls stay silent)."""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["progress", "progress_bar", "showing_progress"]

T = TypeVar("T")

_SHOWN = contextvars.ContextVar("vitpos_progress_shown", default=False)


@contextmanager
def showing_progress(shown: bool = True) -> Iterator[None]:
    """Within the block, :func:`progress` and :func:`progress_bar` draw their bars (``shown=False``: they do not)."""
    token = _SHOWN.set(shown)
    try:
        yield
    finally:
        _SHOWN.reset(token)


def progress_bar(total: int | None, what: str, unit: str = "step") -> Any:
    """A tqdm bar named ``what`` (``update()`` it as work is done), disabled where progress is not shown."""
    from tqdm.auto import tqdm

    return tqdm(
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
