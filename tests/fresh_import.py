"""Import each module named on stdin first, in a process where no module of its package is loaded yet.

Run as a script with every module name as arguments: it imports, in one throw-away child, all of
them and then, in itself, the third-party modules they loaded; then for each name read on stdin it
forks a child that imports only that module and answers one JSON line ``{"module", "error"}``
(the error's last traceback line, or ``""``). The children share the preloaded third-party modules,
so each import costs only the package's own code; an import cycle shows as in a fresh interpreter.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable


def in_child(work: Callable[[], str]) -> str:
    """Run ``work`` in a forked child and return the text it produced."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's exit handlers
        os.close(read)
        try:
            text = work()
        except BaseException:
            text = traceback.format_exc()
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text


def try_import(name: str) -> str:
    """Import ``name``; the last line of the traceback if it fails, else ``""``."""
    try:
        importlib.import_module(name)
    except Exception:
        return traceback.format_exc().strip().splitlines()[-1]
    return ""


def import_all(names: list[str]) -> str:
    """Import every module of ``names`` and list the other packages' modules that got loaded."""
    for name in names:
        try_import(name)
    packages = {name.split(".")[0] for name in names}
    return "\n".join(m for m in list(sys.modules) if m.split(".")[0] not in packages)


def main(names: list[str]) -> None:
    for module in in_child(lambda: import_all(names)).split():
        try_import(module)  # one that fails here (loaded only under conditions) is left to the children
    packages = {name.split(".")[0] for name in names}
    preloaded = sorted(m for m in sys.modules if m.split(".")[0] in packages)
    print(f"preloaded {preloaded}, no fresh import is possible" if preloaded else "ready", flush=True)
    for line in sys.stdin:
        name = line.strip()
        print(json.dumps({"module": name, "error": in_child(lambda name=name: try_import(name))}), flush=True)


if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # the tests' folders (data, models, ...) must not shadow installed packages
    main(sys.argv[1:])
