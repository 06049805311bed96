"""Class names as users write them: a ``classes.txt`` of one name a line, or class folder names.

A class list is UTF-8 text (a byte-order mark is allowed), one name a line, the final newline
optional and Windows line ends accepted. A blank name, a name given twice and a name holding a
line break (which a one-name-a-line file cannot hold) are refused with the line or folder named;
so is a file that is not UTF-8, with the byte that is not, and two names that only look different
(differing in case, outer spaces, Unicode normal form, or invisible characters such as a
zero-width space or NUL), which a reader could not tell apart. A classifier needs at least two
classes: with one, its loss is 0 from the first step and its accuracy 100%, whatever it learns.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from ..errors import VitposError
from .regular import read_regular_file

__all__ = ["read_class_list", "class_list_text", "check_folder_name", "check_class_count", "check_distinct_names"]

MAX_BYTES = 1 << 24
"""The largest class list read (16 MiB: 100,000 names of 160 bytes)."""
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""What Python's ``str.splitlines`` breaks a line at: no class name may hold one."""


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise VitposError(
            f"class list {path} is not UTF-8: byte {err.start} (line {line}) is 0x{raw[err.start]:02X}; "
            "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def read_class_list(path: Path) -> tuple[str, ...]:
    """The class names of ``path``, one a line (see the module docstring)."""
    raw = read_regular_file(path, MAX_BYTES, "class list")
    text = _decode(path, raw).replace("\r\n", "\n")
    if not text.strip():
        raise VitposError(f"class list {path} is empty; write one class name a line (or delete it)")
    lines = text.removesuffix("\n").split("\n")
    for number, name in enumerate(lines, start=1):
        if not name.strip():
            raise VitposError(f"class list {path}: line {number} is blank; give every class a name, one a line")
        broken = [c for c in name if c in LINE_BREAKS]
        if broken:
            raise VitposError(
                f"class list {path}: line {number} ({name!r}) holds the line break {broken[0]!r}; remove it"
            )
    check_distinct_names(lines, f"class list {path}", "line")
    check_class_count(lines, f"class list {path}")
    return tuple(lines)


def class_list_text(names: Sequence[str]) -> str:
    """``names`` as ``classes.txt`` holds them: one a line, each line ended."""
    return "".join(f"{name}\n" for name in names)


def check_folder_name(folder: Path) -> None:
    """Refuse a class folder whose name is not UTF-8 or holds a line break (it could not be a class name)."""
    name = folder.name
    raw = os.fsencode(name)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        shown = os.fsencode(folder).decode("utf-8", "backslashreplace")
        raise VitposError(
            f"class folder {shown} has a name that is not UTF-8 (byte {err.start} of the name is "
            f"0x{raw[err.start]:02X}); rename it in UTF-8"
        ) from None
    broken = [c for c in name if c in LINE_BREAKS]
    if broken:
        raise VitposError(
            f"class folder {folder.parent}/{name!r} has the line break {broken[0]!r} in its name; rename it"
        )


def check_class_count(names: Sequence[str], where: str) -> None:
    """Refuse fewer than two classes (see the module docstring)."""
    if len(names) < 2:
        raise VitposError(
            f"{where} has {len(names)} class ({', '.join(map(repr, names))}): a classifier needs at least two "
            "(with one, its loss is 0 and its accuracy 100% whatever it learns); add the other classes"
        )


def _looks(name: str) -> str:
    """How a name reads: NFKC form, case folded, invisible characters (format and control) and outer spaces gone."""
    shown = "".join(c for c in unicodedata.normalize("NFKC", name) if unicodedata.category(c) not in ("Cf", "Cc"))
    return shown.strip().casefold()


def check_distinct_names(names: Sequence[str], where: str, unit: str = "name") -> None:
    """Refuse a name given twice in ``names``, or two that only look different (see the module docstring)."""
    first: dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        key = _looks(name)
        if key not in first:
            first[key] = number
            continue
        earlier = names[first[key] - 1]
        if earlier == name:
            raise VitposError(f"{where}: {unit} {number} repeats {name!r} ({unit} {first[key]}); name each class once")
        raise VitposError(
            f"{where}: {unit} {number} ({name!r}) looks the same as {unit} {first[key]} ({earlier!r}): they differ "
            "only in case, outer spaces, Unicode form or invisible characters; give the classes names that read "
            "differently"
        )
