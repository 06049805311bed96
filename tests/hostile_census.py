"""Count the hostile inputs of tests/test_bad_inputs.py and tests/test_hostile_*.py by outcome.

The outcomes: clear (the error, or warning, the case expects), unclear (an error that does not
say what it should), traceback, silent (accepted without a word), hang (still running after the
case's watchdog) and lost (a file the case was given was changed, removed or added to). The rows
are the Python API cases, the command-line cases, the hostile-data cases (shards, image
folders, class lists, COCO, the weights cache, the shard writer's output folders) and the output
cases (what a command may replace or delete: a user's files, another command's, its own earlier
results, links, the compile caches).

Run from the repository root: ``python tests/hostile_census.py`` (add pytest options, e.g. ``-n 2``).
With another ``vitpos`` first on ``PYTHONPATH`` it counts how that version answers the same cases.
"""

from __future__ import annotations

import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

CASES = [
    "tests/test_bad_inputs.py",
    "tests/test_hostile_data.py",
    "tests/test_hostile_shards.py",
    "tests/test_hostile_reads.py",
    "tests/test_hostile_outputs.py",
]
TESTS = "python_api_bad_input or command_line_bad_input or hostile_data_ or hostile_output_"
OUTCOMES = ("clear", "unclear", "traceback", "silent", "hang", "lost")
KINDS = ("api", "cli", "data", "output")


def census(extra: list[str]) -> Counter:
    """Run the case tests and count the outcome each recorded (a case that recorded none: its setup failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cases.xml"
        pytest.main(
            [
                *CASES,
                "-k",
                TESTS,
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                "-o",
                "junit_family=xunit1",
                "-qq",
                *extra,
            ]
        )
        counts: Counter = Counter()
        for case in ET.parse(report).iter("testcase"):
            name = case.get("name", "")
            kind = (
                "data"
                if "hostile_data" in name
                else "output"
                if "hostile_output" in name
                else "api"
                if "python_api" in name
                else "cli"
            )
            found = [p.get("value") for p in case.iter("property") if p.get("name") == "outcome"]
            counts[kind, found[0] if found else "not run"] += 1
    return counts


def main() -> None:
    counts = census(sys.argv[1:])
    print(f"{'':6s} {'tried':>6s} " + " ".join(f"{o:>9s}" for o in OUTCOMES))
    for kind in (*KINDS, "all"):
        row = {o: sum(n for (k, o2), n in counts.items() if o2 == o and kind in (k, "all")) for o in OUTCOMES}
        tried = sum(n for (k, _), n in counts.items() if kind in (k, "all"))
        print(f"{kind:6s} {tried:6d} " + " ".join(f"{row[o]:9d}" for o in OUTCOMES))


if __name__ == "__main__":
    main()
