"""Every public module of vitpos imports on its own, first, as in a fresh interpreter (an import
cycle fails there even when the whole suite, importing in another order, hides it)."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import vitpos

PROBE = Path(__file__).with_name("fresh_import.py")


def public_modules(path: Path, prefix: str) -> Iterator[str]:
    """Every module and package under ``path`` whose dotted name has no part starting with ``_``."""
    for info in pkgutil.iter_modules([str(path)]):
        if not info.name.startswith("_"):
            yield prefix + info.name
            if info.ispkg:
                yield from public_modules(path / info.name, f"{prefix}{info.name}.")


PACKAGE = Path(vitpos.__path__[0])
MODULES = ["vitpos", *public_modules(PACKAGE, "vitpos.")]


@pytest.fixture(scope="module")
def fresh_import() -> Iterator[subprocess.Popen[str]]:
    """One probe per test process: it preloads the third-party packages, then forks per module."""
    source = str(PACKAGE.parent)  # the probe imports the vitpos under test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    probe = subprocess.Popen(
        [sys.executable, str(PROBE), *MODULES], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert probe.stdout is not None
    assert (status := probe.stdout.readline()) == "ready\n", status
    yield probe
    probe.communicate()


def test_the_package_has_its_layers():
    assert {"vitpos.models", "vitpos.encodings.relative", "vitpos.engine", "vitpos.cli"} <= set(MODULES)
    assert len(MODULES) > 100


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the probe forks one fresh import per module")
@pytest.mark.parametrize("module", MODULES)
def test_module_imports_in_a_fresh_interpreter(module, fresh_import):
    assert fresh_import.stdin is not None and fresh_import.stdout is not None
    fresh_import.stdin.write(module + "\n")
    fresh_import.stdin.flush()
    answer = json.loads(fresh_import.stdout.readline())
    assert answer["module"] == module
    assert not answer["error"], f"`import {module}` first in a fresh interpreter: {answer['error']}"
