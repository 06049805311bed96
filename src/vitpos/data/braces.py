"""WebDataset brace patterns, expanded lazily: ``shard-{000000..000999}.tar`` and ``{a,b}``.

A pattern's name count is computed from its braces without listing them, so a typo such as
``{000000..999999999}`` is refused at once instead of building a billion names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import VitposError

__all__ = ["MAX_SHARDS", "brace_count", "iter_braces", "expand_braces"]

MAX_SHARDS = 100_000
"""The most shards one pattern may name: every one is opened and indexed when the data is opened."""

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")


@dataclass(frozen=True)
class _Range:
    """``{lo..hi}``: the numbers lo to hi, zero-padded to the width ``lo`` is written with."""

    lo: int
    hi: int
    width: int

    def __len__(self) -> int:
        return self.hi - self.lo + 1

    def __iter__(self) -> Iterator[str]:
        return (f"{i:0{self.width}d}" for i in range(self.lo, self.hi + 1))


def _groups(pattern: str) -> list[str | _Range | tuple[str, ...]]:
    """The pattern as literal text and brace groups, in order (a range is kept as its bounds)."""
    parts: list[str | _Range | tuple[str, ...]] = []
    rest = pattern
    while (start := rest.find("{")) >= 0:
        end = rest.find("}", start)
        if end < 0:
            raise VitposError(f"shard pattern {pattern!r} opens a brace it never closes")
        body = rest[start : end + 1]
        found = _RANGE.fullmatch(body)
        if found:
            lo, hi = found.groups()
            if int(hi) < int(lo):
                raise VitposError(f"shard pattern {pattern!r}: the range {body} runs backwards")
            parts += [rest[:start], _Range(int(lo), int(hi), len(lo))]
        else:
            parts += [rest[:start], tuple(body[1:-1].split(","))]
        rest = rest[end + 1 :]
    return [*parts, rest]


def brace_count(pattern: str) -> int:
    """How many names ``pattern`` stands for, computed without listing them."""
    return math.prod(len(p) for p in _groups(pattern) if not isinstance(p, str))


def iter_braces(pattern: str) -> Iterator[str]:
    """Every name ``pattern`` stands for, one at a time: ``{000..002}`` is a zero-padded range, ``{a,b}`` a list."""
    return _product(_groups(pattern))


def _product(parts: Sequence[str | _Range | tuple[str, ...]]) -> Iterator[str]:
    if not parts:
        yield ""
        return
    head, rest = parts[0], parts[1:]
    for option in [head] if isinstance(head, str) else head:
        for tail in _product(rest):
            yield option + tail


def expand_braces(pattern: str, limit: int = MAX_SHARDS) -> list[str]:
    """Every name ``pattern`` stands for, as a list; a pattern of more than ``limit`` names is an error."""
    count = brace_count(pattern)
    if count > limit:
        raise VitposError(
            f"shard pattern {pattern!r} names {count} shards, more than the {limit} vitpos opens and indexes at once; "
            "check the brace range, or merge shards into fewer, larger ones"
        )
    return list(iter_braces(pattern))
