"""Every command and Python example of README.md and docs/ runs as its page says (docs/testing.md)."""

from pathlib import Path

import pytest

from .blocks import PAGES, RUNNABLE, Block, MarkerError, page_blocks
from .runner import run_block


def _collect() -> tuple[list[Block], list[str]]:
    """The blocks of every page, and one message per page whose markers are wrong."""
    blocks, errors = [], []
    for page in PAGES:
        try:
            blocks.extend(page_blocks(page))
        except MarkerError as error:
            errors.append(str(error))
    return blocks, errors


BLOCKS, ERRORS = _collect()
RUNS = [b for b in BLOCKS if b.lang in RUNNABLE]


def _param(block: Block) -> object:
    marks = {"slow": [pytest.mark.slow], "skip": [pytest.mark.skip(reason=f"{block.where}: {block.reason}")]}
    return pytest.param(block, id=block.where, marks=marks.get(block.kind, []))


def test_every_block_says_how_it_is_tested() -> None:
    """A block without a marker, or with a wrong one, fails here: a new example cannot go untested."""
    assert not ERRORS, "\n".join(ERRORS)
    assert RUNS, "no runnable block found in README.md and docs/"


@pytest.mark.parametrize("block", [_param(b) for b in RUNS])
def test_block_runs_as_the_page_says(block: Block, tmp_path: Path) -> None:
    """The block exits with status 0, its stated results hold, and every line it quotes was printed."""
    run_block(block, tmp_path)
