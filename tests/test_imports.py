"""Every public module imports on its own in a fresh interpreter: no import order of a test run hides a circle."""

import os
import pkgutil
import subprocess
import sys

import pytest

import vitpos

IMPORT_EACH = """
import importlib, os, sys, traceback

names = sys.argv[1:]
read, write = os.pipe()
if os.fork() == 0:  # a first child imports everything and names the other packages that came with it
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:
            pass
    os.write(write, " ".join(m for m in list(sys.modules) if m.split(".")[0] != "vitpos").encode())
    os._exit(0)
os.close(write)
with os.fdopen(read) as pipe:
    others = pipe.read().split()
for other in others:  # loaded once here, so that each fork below runs only vitpos's own imports
    try:
        importlib.import_module(other)
    except BaseException:
        pass
assert not any(m.split(".")[0] == "vitpos" for m in sys.modules)
for name in names:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            print(f"--- {name}", flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def public_modules() -> list[str]:
    """``vitpos`` and every module under it whose dotted name has no part starting with an underscore."""
    found = pkgutil.walk_packages(vitpos.__path__, "vitpos.")
    names = [m.name for m in found if not any(part.startswith("_") for part in m.name.split("."))]
    return ["vitpos", *sorted(names)]


def test_the_module_list_holds_every_layer():
    names = public_modules()
    for expected in ("vitpos.tasks.segmentation.metrics", "vitpos.tasks.detection.model", "vitpos.study.run"):
        assert expected in names
    assert "vitpos.__main__" not in names and len(names) > 100


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks one fresh import per module")
def test_every_public_module_imports_alone_in_a_fresh_interpreter(tmp_path):
    src = os.path.dirname(os.path.dirname(vitpos.__file__))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # the first child's bytecode, kept out of the source tree, spares every later fork compiling it again
    env |= {
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "PYTHONPYCACHEPREFIX": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH, *public_modules()], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", done.stdout  # each failed import printed its name and traceback
