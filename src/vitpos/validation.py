"""Type and range checks of config dataclass fields, declared once per field.

A field declares its allowed values with :func:`bounded` (a range, choices or a pattern) next
to its type hint; :func:`check_fields`, called from ``__post_init__``, checks every field
against both and normalises loaded forms (lists become tuples, dicts become nested configs,
integers become floats where a float is wanted)::

    @dataclass
    class Config:
        epochs: int = bounded(30, ge=1)
        lr: float = bounded(1e-3, ge=0)

        def __post_init__(self) -> None:
            check_fields(self)

A value of the wrong type or out of range raises :class:`~vitpos.errors.ConfigError` naming
the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, quote

__all__ = ["Allowed", "bounded", "check_fields", "check_value"]


@dataclass(frozen=True)
class Allowed:
    """The values a field may take beyond its type: a numeric range, a set of choices or a pattern."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    """A regular expression the whole string must match; ``choices`` then names the accepted forms."""
    min_items: int = 1
    """The fewest items a variable-length list may hold."""

    def admits(self, value: Any) -> bool:
        """Whether ``value`` (already of the right type) is allowed."""
        if isinstance(value, str):
            if self.pattern is not None:
                return re.fullmatch(self.pattern, value) is not None
            return not self.choices or value in self.choices
        return not (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def describe(self) -> str:
        """``>= 1``, ``in [0, 1)``, ``one of cls, gap`` ..."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        low = (self.ge, "[") if self.ge is not None else (self.gt, "(") if self.gt is not None else None
        high = (self.le, "]") if self.le is not None else (self.lt, ")") if self.lt is not None else None
        if low and high:
            return f"in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
        if low:
            return (">= " if low[1] == "[" else "> ") + _num(low[0])
        if high:
            return ("<= " if high[1] == "]" else "< ") + _num(high[0])
        return ""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def bounded(default: Any, **allowed: Any) -> Any:
    """A dataclass field with ``default`` whose values :func:`check_fields` limits to ``Allowed(**allowed)``."""
    if "choices" in allowed:
        allowed["choices"] = tuple(allowed["choices"])
    return dataclasses.field(default=default, metadata={"allowed": Allowed(**allowed)})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_fields(config: Any) -> None:
    """Check and normalise every field of the dataclass instance ``config``, frozen or not
    (see the module docstring)."""
    owner = type(config).__name__
    hints = _hints(type(config))  # type: ignore[arg-type]  # classes are hashable; mypy disagrees (python/mypy#11470)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        object.__setattr__(
            config, f.name, check_value(f"{owner}.{f.name}", value, hints[f.name], f.metadata.get("allowed"))
        )


def check_value(name: str, value: Any, hint: Any, allowed: Allowed | None = None) -> Any:
    """``value`` in the normal form of type ``hint``; raises :class:`ConfigError` naming ``name``."""
    converted = _conform(value, hint, allowed or Allowed())
    if converted is _REJECT:
        hint_text = ""
        if isinstance(value, str) and float in _alternatives(hint) and _is_number(value):
            hint_text = "; YAML reads a number like 1e-3 as text: write it with a dot, 1.0e-3"
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            hint_text = "; integers must fit in 64 bits"
        expected = _expect(hint, allowed or Allowed())
        raise ConfigError(
            f"{name} = {quote(value)} ({type(value).__name__}) is not allowed: expected {expected}{hint_text}"
        )
    return converted


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_REJECT = object()


def _alternatives(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _conform(value: Any, hint: Any, allowed: Allowed) -> Any:
    """``value`` converted to ``hint``, or ``_REJECT``."""
    options = _alternatives(hint)
    if len(options) > 1:
        if value is None:
            return None if type(None) in options else _REJECT
        # a sequence can only be the tuple alternative, a scalar only a scalar one
        sequence = isinstance(value, (list, tuple))
        for option in options:
            if option is type(None) or (typing.get_origin(option) is tuple) != sequence:
                continue
            out = _conform(value, option, allowed)
            if out is not _REJECT:
                return out
        return _REJECT
    if typing.get_origin(hint) is tuple:
        return _conform_tuple(value, typing.get_args(hint), allowed)
    if hint is bool:
        return value if isinstance(value, bool) else _REJECT
    if hint is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and -(2**63) <= int(value) < 2**63
        return int(value) if ok and allowed.admits(int(value)) else _REJECT
    if hint is float:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok and allowed.admits(float(value)) else _REJECT
    if hint is str:
        return value if isinstance(value, str) and allowed.admits(value) else _REJECT
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if isinstance(value, dict):
            known = {f.name for f in dataclasses.fields(hint)}
            return hint(**value) if set(value) <= known else _REJECT
        return value if isinstance(value, hint) else _REJECT
    return value


def _conform_tuple(value: Any, args: tuple[Any, ...], allowed: Allowed) -> Any:
    if not isinstance(value, (list, tuple)):
        return _REJECT
    items = (args[0],) * len(value) if len(args) == 2 and args[1] is Ellipsis else args
    if len(items) != len(value) or len(value) < allowed.min_items:
        return _REJECT
    out = tuple(_conform(v, h, allowed) for v, h in zip(value, items, strict=True))
    return _REJECT if any(v is _REJECT for v in out) else out


def _expect(hint: Any, allowed: Allowed) -> str:
    """What a field of type ``hint`` accepts, in words."""
    options = [o for o in _alternatives(hint) if o is not type(None)]
    text = " or ".join(_expect_one(o, allowed) for o in options)
    return text + (" or None" if len(options) < len(_alternatives(hint)) else "")


def _expect_one(hint: Any, allowed: Allowed) -> str:
    limit = allowed.describe()
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        fewest = {0: "zero", 1: "one"}.get(allowed.min_items, str(allowed.min_items))
        count = f"{fewest} or more" if len(args) == 2 and args[1] is Ellipsis else str(len(args))
        plural = {int: "integers", float: "numbers", str: "strings"}.get(args[0], "values")
        return f"a list of {count} {plural}" + (f" {limit}" if limit else "")
    if hint is bool:
        return "true or false"
    if hint in (int, float):
        return ("an integer" if hint is int else "a number") + (f" {limit}" if limit else "")
    if hint is str:
        return limit if allowed.choices else "a string"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"a {hint.__name__} or a mapping of its fields ({', '.join(f.name for f in dataclasses.fields(hint))})"
    return getattr(hint, "__name__", str(hint))
