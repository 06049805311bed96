"""Numbers and lists the pages state in prose, checked against the code: the slot values, the data
specs, the study's run time, the columns of a quoted eval table, the presets with released weights
and (slow) the test counts."""

import re
import subprocess
import sys

import pytest

import vitpos
from vitpos import registry
from vitpos.commands.study import __doc__ as STUDY_HELP
from vitpos.data import DATA_FORMS
from vitpos.engine.evaluate import resolution_table
from vitpos.weights.pretrained import RELEASES

from .blocks import PAGES, REPO, page_blocks

README = (REPO / "README.md").read_text(encoding="utf-8")
STUDY = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
SLOTS = {"absolute": registry.ABSOLUTE, "join": registry.JOIN, "conditional": registry.CONDITIONAL}
SLOTS["relative"] = registry.RELATIVE


@pytest.mark.parametrize("slot", list(SLOTS))
def test_the_readme_slot_table_lists_every_registered_value(slot):
    row = next(line for line in README.splitlines() if line.startswith(f"| `{slot}` |"))
    listed = {re.split(r"[\[:]", value)[0] for value in re.findall(r"`([^`]+)`", row.split("|")[3])}
    assert listed == set(SLOTS[slot].names()), f"README's {slot} row lists {sorted(listed)}"


def test_the_pages_name_every_data_spec_as_the_command_line_does():
    text = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    forms = [re.sub(r" \([^)]*\)", "", form) for form in DATA_FORMS.values()]  # remarks in brackets aside
    missing = [form for form in forms if form not in text]
    assert not missing, f"data specs the CLI names but no page spells so: {missing}"


def test_the_study_run_time_is_stated_as_measured():
    minutes, seconds = map(int, re.search(r"\*\*(\d+) min (\d+) s of wall time\*\*", STUDY).groups())
    rounded = round(minutes + seconds / 60)
    lines = [line for line in (README + STUDY.split("## ")[0]).splitlines() if "make study" in line]
    stated = re.findall(r"about (\d+) min", "\n".join(lines) + (STUDY_HELP or ""))
    assert stated and all(int(n) == rounded for n in stated), f"measured {minutes} min {seconds} s; stated {stated}"


def _quoted_eval_tables() -> list[tuple[str, str]]:
    """(where, header line) of every table a page quotes from ``vitpos eval``."""
    found = []
    for page in PAGES:
        for block in page_blocks(page):
            for line in block.text.splitlines():
                if line.startswith("| Model | Params |") and block.kind in ("output", "measured"):
                    found.append((block.where, line))
    return found


@pytest.mark.parametrize(("where", "header"), _quoted_eval_tables())
def test_a_quoted_eval_table_has_the_columns_eval_prints(where, header):
    cells = header.strip("| ").split(" | ")[2:]
    sizes = list(dict.fromkeys(re.match(r"(\d+(?:x\d+)?)\(", cell)[1] for cell in cells))
    results = {(int(s.split("x")[0]), int(s.split("x")[-1])): {} for s in sizes}
    printed = {name: resolution_table([("m", 1, results)], name).splitlines()[0] for name in registry.TASKS.names()}
    assert header in printed.values(), f"{where}: eval prints none of {sorted(set(printed.values()))}"


def _collected(*marks: str) -> tuple[int, int]:
    """(selected, deselected) tests of ``pytest --collect-only`` with ``-m`` options."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider"]
    done = subprocess.run([*command, *marks, "tests"], cwd=REPO, capture_output=True, text=True, timeout=300)
    found = re.search(r"(\d+)/\d+ tests collected \((\d+) deselected\)", done.stdout)
    assert found, done.stdout[-2000:]
    return int(found[1]), int(found[2])


@pytest.mark.slow
def test_the_stated_test_counts_are_the_collected_ones():
    fast, slow = _collected("-m", "not slow")
    stated = int(re.search(r"([\d,]+) tests\)", README)[1].replace(",", ""))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    stated_slow = int(re.search(r"(\d+) tests in about", ci)[1])
    assert (stated, stated_slow) == (fast, slow), "README.md and .ci/run state other counts than pytest collects"


def test_the_presets_with_released_weights_are_the_ones_vitpos_downloads():
    page = (REPO / "docs" / "weights.md").read_text(encoding="utf-8")
    paragraph = page.split("**Weights by name.**")[1].split("\n\n")[0]
    named = {name for name in re.findall(r"`([a-z][\w]*)`", paragraph) if name in vitpos.list_models()}
    assert named == set(RELEASES), f"docs/weights.md lists {sorted(named ^ set(RELEASES))} unlike the registry"


def test_the_first_training_run_takes_the_same_time_on_both_pages():
    """The README's first run is training.md's first command: one measured time (re-measure both together)."""
    training = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    stated = [
        re.findall(r"about (\d+) s of CPU time \(a minute or more on 2 busy cores\)", page)
        for page in (README, training)
    ]
    assert stated[0] and stated[0] == stated[1], f"README.md states {stated[0]}, docs/training.md {stated[1]}"
