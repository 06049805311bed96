"""The errors vitpos raises for bad input: the command line prints them as one line, exit status 2.

All subclass :class:`ValueError`, so ``except ValueError`` keeps catching them.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

__all__ = ["VitposError", "ConfigError", "CheckpointError", "quote", "plain_text"]


class VitposError(ValueError):
    """Something the user asked for that cannot be done: a bad option, file, folder or input."""


class ConfigError(VitposError):
    """A configuration field of the wrong type or out of its allowed range."""


class CheckpointError(VitposError):
    """A checkpoint or weights file that is missing, corrupt, unsafe, or does not fit the model asked for."""


_QUOTE = reprlib.Repr()
_QUOTE.maxlevel, _QUOTE.maxstring, _QUOTE.maxother, _QUOTE.maxlong = 2, 80, 80, 40
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 6


def quote(value: Any) -> str:
    """``repr(value)`` cut short for an error message (never built in full, so a huge value stays cheap)."""
    return _QUOTE.repr(value)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def plain_text(err: BaseException, limit: int = 300) -> str:
    """A library's error message for quoting in ours: colour codes stripped, whitespace joined, cut short."""
    text = " ".join(_ANSI.sub("", str(err)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
