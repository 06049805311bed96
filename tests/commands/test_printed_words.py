"""What the commands print reads one way: R² spelt so everywhere, headers that say what was done."""

import io
import re
import tokenize
from pathlib import Path

import pytest

from vitpos.cli import main

from .test_analysis_commands import TINY_ARGS

ROOT = Path(__file__).resolve().parents[2]


def test_r_squared_is_spelt_one_way_in_every_message_and_page():
    """Strings in the sources (messages, headers, help) and the docs write R², never R2 or R^2."""
    wrong = re.compile(r"\bR(2|\^2)(?![\w])")
    found = []
    for path in sorted((ROOT / "src" / "vitpos").rglob("*.py")):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        found += [f"{path.name}:{t.start[0]}" for t in tokens if t.type == tokenize.STRING and wrong.search(t.string)]
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        found += [f"{page.name}:{n}" for n, line in enumerate(page.read_text().splitlines(), 1) if wrong.search(line)]
    assert not found, found


def test_probe_and_awareness_headers(tmp_path, capsys):
    assert main(["probe", *TINY_ARGS, "--absolute", "sincos2d", "--out", str(tmp_path / "a")]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "(dx,dy) R²" in header and header.endswith("10 folds (N // 3 on a grid of N < 30 cells) over cells")
    options = ["--absolute", "sincos2d", "--folds", "3", "--split", "pairs", "--out", str(tmp_path / "b")]
    assert main(["probe", *TINY_ARGS, *options]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("   3 folds over pairs")
    assert main(["awareness", *TINY_ARGS, "--images", "8", "--out", str(tmp_path / "c")]) == 0
    assert re.match(r"features +R² +cell acc$", capsys.readouterr().out.splitlines()[1])


def test_export_says_what_its_checkpoint_is_for(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--checkpoint RUN a trained model: a run folder of `vitpos train`, a checkpoint folder, a released" in text
    assert "analyse" not in text
