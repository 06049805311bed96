"""The short string form of a slot value: ``name[@at][:flag][:key=value]...``.

Examples: ``learned``, ``fourier:gamma=10``, ``peg@0-5:k=3``, ``irpe:product:ctx:k``.
A spec parses to a :class:`SlotSpec` and prints back to the same string.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import VitposError

__all__ = ["SlotSpec", "SpecError", "positive_int", "non_negative_int", "int_in", "positive_float", "one_of"]

INT64_MAX = 2**63 - 1
"""The largest integer an option takes: torch and numpy hold integers in 64 bits."""


class SpecError(VitposError):
    """A slot string or option that cannot be understood."""


def positive_int(text: str) -> int:
    """Option converter: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= INT64_MAX:
        raise ValueError("must be a positive integer" + (" below 2**63" if value > INT64_MAX else ""))
    return value


def non_negative_int(text: str) -> int:
    """Option converter: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= INT64_MAX:
        raise ValueError("must be a non-negative integer" + (" below 2**63" if value > INT64_MAX else ""))
    return value


def int_in(low: int, high: int) -> Callable[[str], int]:
    """Option converter factory: an integer in ``low..high`` (a bound that keeps a typo from asking
    for a table no machine holds)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"must be an integer in {low}..{high}") from None
        if not low <= value <= high:
            raise ValueError(f"must be an integer in {low}..{high}")
        return value

    return convert


def positive_float(text: str) -> float:
    """Option converter: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError("must be a positive number")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    """Option converter factory: the value must be one of ``choices``."""

    def convert(text: str) -> str:
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return text

    return convert


@dataclass(frozen=True)
class SlotSpec:
    """One parsed slot value: a registered name, an optional placement and options."""

    name: str
    at: str | None = None
    flags: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> SlotSpec:
        """Parse ``name[@at][:flag][:key=value]...``."""
        if not isinstance(text, str) or not text.strip():
            raise SpecError(f"a slot value must be a non-empty string, got {text!r}")
        head, *parts = text.strip().split(":")
        name, sep, at = head.partition("@")
        if not name or (sep and not at):
            raise SpecError(f"cannot parse slot value {text!r}: expected 'name[@at][:option...]'")
        flags: list[str] = []
        options: list[tuple[str, str]] = []
        for part in parts:
            if not part:
                raise SpecError(f"empty option in slot value {text!r} (two ':' in a row?)")
            key, eq, value = part.partition("=")
            if eq:
                if not key or not value:
                    raise SpecError(f"option {part!r} in {text!r} must look like key=value")
                if any(key == seen for seen, _ in options):
                    raise SpecError(f"option {key!r} is given twice in {text!r}; give each option once")
                options.append((key, value))
            elif part in flags:
                raise SpecError(f"flag {part!r} is given twice in {text!r}; give each flag once")
            else:
                flags.append(part)
        return cls(name.lower(), at or None, tuple(flags), tuple(options))

    def __str__(self) -> str:
        head = self.name + (f"@{self.at}" if self.at is not None else "")
        tail = [*self.flags, *(f"{k}={v}" for k, v in self.options)]
        return ":".join([head, *tail])

    def typed_options(self, schema: Mapping[str, Callable[[str], Any]]) -> dict[str, Any]:
        """Convert ``key=value`` options with ``schema[key]``; unknown keys are an error."""
        out: dict[str, Any] = {}
        for key, value in self.options:
            if key not in schema:
                valid = ", ".join(sorted(schema)) or "none"
                raise SpecError(f"'{self}': unknown option {key!r}; valid options: {valid}")
            try:
                out[key] = schema[key](value)
            except ValueError as err:
                raise SpecError(f"'{self}': option {key}={value!r} is invalid ({err})") from None
        return out

    def check_flags(self, allowed: set[str] | frozenset[str]) -> None:
        """Raise if a flag is not in ``allowed``."""
        for flag in self.flags:
            if flag not in allowed:
                valid = ", ".join(sorted(allowed)) or "none"
                raise SpecError(f"'{self}': unknown flag {flag!r}; valid flags: {valid}")

    def check_no_placement(self) -> None:
        """Raise if an ``@at`` placement was given to a slot that has none."""
        if self.at is not None:
            raise SpecError(f"'{self}': '{self.name}' takes no '@' placement")
