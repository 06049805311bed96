"""The docs test's own rules: a block without a marker fails, quoted lines and stated results are checked."""

import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import MarkerError, page_blocks
from .expectations import instrument
from .outputs import missing_lines


@pytest.fixture
def page(tmp_path: Path):
    """Writes a Markdown page and returns its path."""

    def write(text: str) -> Path:
        path = tmp_path / "page.md"
        path.write_text(text)
        return path

    return write


def test_a_block_without_a_marker_is_an_error_naming_its_line(page) -> None:
    path = page("text\n\n```bash\nvitpos models\n```\n")
    with pytest.raises(MarkerError, match=r"page\.md:3: a ```bash block without a docs-test marker"):
        page_blocks(path)


@pytest.mark.parametrize(
    "marker, message",
    [
        ("<!-- docs-test: output -->", "takes docs-test: fast | slow | skip"),
        ("<!-- docs-test: skip -->", "must say why"),
        ("<!-- docs-test: fast epochs=1 -->", "unknown marker option 'epochs=1'"),
        ("<!-- docs-test: fast replace=1 -->", "needs the form OLD=>NEW"),
        ("<!-- docs-test: fast continues -->", "no command block comes before it"),
    ],
)
def test_a_wrong_marker_is_an_error_saying_what_to_write(page, marker: str, message: str) -> None:
    path = page(f"{marker}\n```bash\nvitpos models\n```\n")
    with pytest.raises(MarkerError, match=message):
        page_blocks(path)


def test_markers_give_kinds_options_and_attached_outputs(page) -> None:
    path = page(
        '<!-- docs-test: slow replace="--epochs 5=>--epochs 1" setup="echo hi" -->\n```bash\n'
        "vitpos train --epochs 5\n```\n<!-- docs-test: output tol=0.5 -->\n```text\nacc 1.0\n```\n"
        "<!-- docs-test: skip reason='needs a GPU' -->\n```python\nimport torch\n```\n"
    )
    run, output, skipped = page_blocks(path)
    assert (run.kind, run.setup, run.source()) == ("slow", "echo hi", "vitpos train --epochs 1\n")
    assert run.outputs == [output] and output.tol == 0.5
    assert (skipped.kind, skipped.reason, skipped.line) == ("skip", "needs a GPU", 10)


def test_a_replacement_that_no_longer_matches_fails(page) -> None:
    path = page('<!-- docs-test: fast replace="--epochs 5=>--epochs 1" -->\n```bash\nvitpos train --epochs 4\n```\n')
    (block,) = page_blocks(path)
    with pytest.raises(MarkerError, match="replace='--epochs 5' is not in the block"):
        block.source()


PRINTED = "table   grid left/right  up/down\nabsolute      8x8    0.471    0.417   4,032/4,032\n"


@pytest.mark.parametrize(
    "quoted, tol, missing",
    [
        ("absolute 8x8 0.471 0.417 4,032/4,032", 0.0, False),
        ("absolute 8x8 0.5 0.5 ...", 0.1, False),
        ("absolute 8x8 0.5 0.5 ...", 0.05, True),
        ("absolute 8x8 0.471 0.417 4,033/4,032", 0.0, True),
        ("learned 8x8 0.471 0.417 ...", 0.0, True),
    ],
)
def test_quoted_lines_must_be_printed_with_numbers_within_the_tolerance(quoted: str, tol: float, missing: bool) -> None:
    assert missing_lines(quoted, PRINTED, tol) == ([quoted] if missing else [])


def _run(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "block.py"
    script.write_text(instrument(source, "page.md", 10))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)


def test_stated_results_are_checked(tmp_path: Path) -> None:
    good = _run(
        "pair = ([1, 2], 50)  # -> [1, 2], 50  a remark\nfor n in (1, 2):\n    x = n * 3  # -> ...\n"
        "int('x')  # raises ValueError: invalid literal\n{}['k']  # raises LookupError: 'k'\n",
        tmp_path,
    )
    assert good.returncode == 0, good.stderr
    wrong = _run("x = 1 + 1\ny = x * 2  # -> 5\n", tmp_path)
    assert wrong.returncode != 0 and "page.md:11: the page states '5', the code gives '4'" in wrong.stderr
    silent = _run("int('3')  # raises ValueError: invalid literal\n", tmp_path)
    assert silent.returncode != 0 and "page.md:10: the page states that this raises ValueError" in silent.stderr
