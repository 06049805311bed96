"""Checks that the lines a page quotes appear in what a command printed, numbers within a tolerance."""

import re

MINUS = "\N{MINUS SIGN}"
"""The typographic minus some tables print."""
NUMBER = re.compile(rf"[-{MINUS}]?\d[\d,]*(?:\.\d+)?")
WILDCARD = "..."


def _value(text: str) -> float:
    """A printed number as a float: thousands separators dropped, the typographic minus read as one."""
    return float(text.replace(",", "").replace(MINUS, "-"))


def _pattern(expected: str) -> re.Pattern[str]:
    """A regex for one quoted line: its numbers match any number, ``...`` matches anything."""
    parts = []
    for piece in re.split(r"(\.\.\.)", expected):
        if piece == WILDCARD:
            parts.append(".*?")
            continue
        cursor = 0
        for number in NUMBER.finditer(piece):
            parts.append(re.escape(piece[cursor : number.start()]))
            parts.append(f"({NUMBER.pattern})")
            cursor = number.end()
        parts.append(re.escape(piece[cursor:]))
    return re.compile(r"\s+".join("".join(parts).split(r"\ ")))


def _squeeze(line: str) -> str:
    """One line with runs of white space made one space, as a page's table may realign a column."""
    return " ".join(line.split())


def missing_lines(expected: str, printed: str, tol: float) -> list[str]:
    """The quoted lines that no printed line matches (same text, each number within ``tol``)."""
    printed_lines = [_squeeze(line) for line in printed.splitlines()]
    missing = []
    for line in expected.splitlines():
        line = _squeeze(line)
        if not line or line == WILDCARD:
            continue
        pattern = _pattern(line)
        wanted = [_value(n) for n in NUMBER.findall(line.replace(WILDCARD, " "))]
        if not any(_close(pattern.search(out), wanted, tol) for out in printed_lines):
            missing.append(line)
    return missing


def _close(match: re.Match[str] | None, wanted: list[float], tol: float) -> bool:
    """Whether a matched line's numbers are the quoted ones, each within ``tol``."""
    if match is None:
        return False
    found = [_value(n) for n in match.groups()]
    return len(found) == len(wanted) and all(abs(f - w) <= tol for f, w in zip(found, wanted, strict=True))
