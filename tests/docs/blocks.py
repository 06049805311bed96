"""The fenced blocks of README.md and docs/*.md, each with the ``docs-test`` marker that says how it is tested."""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

RUNNABLE = {"bash": "shell", "sh": "shell", "console": "console", "python": "python"}
"""Languages a runner takes: every such block is run, or skipped with a reason."""
RUN_KINDS = ("fast", "slow", "skip")
TEXT_KINDS = ("output", "measured", "text")
"""A block in another language is the checked output of the command before it, a measured output
of a long run (quoted, not re-run), or text that is no command (a file tree, a config)."""

MARKER = re.compile(r"^<!--\s*docs-test:(.*?)-->\s*$")
FENCE = re.compile(r"^(`{3,})\s*([\w-]*)\s*$")


def page_name(page: Path) -> str:
    """A page's path from the repository root (its bare name outside the repository)."""
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


class MarkerError(ValueError):
    """A block whose marker is missing, unknown or incomplete; the message names the page and line."""


@dataclass
class Block:
    """One fenced block: where it is, its language, its marker's kind and options, and its text."""

    page: Path
    line: int
    lang: str
    kind: str
    text: str
    reason: str = ""
    replace: list[tuple[str, str]] = field(default_factory=list)
    setup: str = ""
    tol: float = 0.0
    cwd: str = "tmp"
    continues: "Block | None" = None
    outputs: list["Block"] = field(default_factory=list)

    @property
    def where(self) -> str:
        """``docs/page.md:LINE``, the id of the block in test names and messages."""
        return f"{page_name(self.page)}:{self.line}"

    def source(self) -> str:
        """The text with the marker's replacements applied (tiny settings, paths of test fixtures)."""
        text = self.text
        for old, new in self.replace:
            if old not in text:
                raise MarkerError(f"{self.where}: replace={old!r} is not in the block; fix the marker")
            text = text.replace(old, new)
        return text


def _marker(words: str, where: str, lang: str) -> dict[str, object]:
    """Parse ``kind key=value ...`` of one marker, checking the kind fits the block's language."""
    tokens = shlex.split(words)
    if not tokens:
        raise MarkerError(f"{where}: empty docs-test marker; write one of {RUN_KINDS + TEXT_KINDS}")
    kind, options = tokens[0], tokens[1:]
    allowed = RUN_KINDS if lang in RUNNABLE else TEXT_KINDS
    if kind not in allowed:
        raise MarkerError(f"{where}: a ```{lang} block takes docs-test: {' | '.join(allowed)}, not {kind!r}")
    parsed: dict[str, object] = {"kind": kind, "replace": []}
    for option in options:
        if option == "continues":
            parsed["continues"] = True
            continue
        key, sep, value = option.partition("=")
        if not sep or key not in ("reason", "replace", "setup", "tol", "cwd"):
            raise MarkerError(
                f"{where}: unknown marker option {option!r}; use continues, reason=, replace=, setup=, tol=, cwd="
            )
        if key == "replace":
            old, arrow, new = value.partition("=>")
            if not arrow:
                raise MarkerError(f"{where}: replace={value!r} needs the form OLD=>NEW")
            parsed["replace"].append((old, new))  # type: ignore[attr-defined]
        elif key == "tol":
            parsed["tol"] = float(value)
        else:
            parsed[key] = value
    if kind == "skip" and not parsed.get("reason"):
        raise MarkerError(f"{where}: a skipped block must say why: docs-test: skip reason='...'")
    return parsed


def page_blocks(page: Path) -> list[Block]:
    """Every fenced block of one page, output blocks attached to the command block before them."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        ticks, lang = fence.group(1), fence.group(2) or "(none)"
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        where = f"{page_name(page)}:{i + 1}"
        if end is None:
            raise MarkerError(f"{where}: the block is never closed")
        marker = MARKER.match(lines[i - 1]) if i else None
        if marker is None:
            raise MarkerError(
                f"{where}: a ```{lang} block without a docs-test marker on the line before it; see docs/testing.md"
            )
        options = _marker(marker.group(1), where, lang)
        if options.pop("continues", False):
            earlier = [b for b in blocks if b.lang in RUNNABLE]
            if not earlier:
                raise MarkerError(f"{where}: continues, but no command block comes before it on the page")
            options["continues"] = earlier[-1]
        block = Block(page, i + 1, lang, text="\n".join(lines[i + 1 : end]) + "\n", **options)  # type: ignore[arg-type]
        if block.kind in ("output", "measured"):
            if not blocks or blocks[-1].lang not in RUNNABLE:
                raise MarkerError(f"{where}: an {block.kind} block must follow the command block it quotes")
            blocks[-1].outputs.append(block)
        blocks.append(block)
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    """The blocks of every page, in page order."""
    return [block for page in PAGES for block in page_blocks(page)]


def main() -> None:
    """Print each page's blocks by marker, and the totals."""
    kinds = RUN_KINDS + TEXT_KINDS
    totals = dict.fromkeys(kinds, 0)
    print(f"{'page':24}" + "".join(f"{kind:>9}" for kind in kinds))
    for page in PAGES:
        counts = dict.fromkeys(kinds, 0)
        for block in page_blocks(page):
            counts[block.kind] += 1
            totals[block.kind] += 1
        print(f"{page_name(page):24}" + "".join(f"{counts[kind]:>9}" for kind in kinds))
    print(f"{'total':24}" + "".join(f"{totals[kind]:>9}" for kind in kinds))


if __name__ == "__main__":
    main()
