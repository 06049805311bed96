"""What a command may replace or delete: only the files it wrote itself, known by the manifest it keeps.

A command that writes results records each file in ``.vitpos-manifest.jsonl``, in the folder it
writes to: one JSON line per write, with the file's name below that folder, the command, and the
file's size and modification time. A file belongs to the command whose last line describes it as
it is now; a file edited, copied over or replaced since belongs to no command. The rule, for every
command:

- a new name is written;
- a link, a folder or any other file that is not a regular file is never replaced or deleted;
- a file the user or another command wrote is never replaced or deleted;
- the command's own earlier result is replaced or deleted only with ``--force`` (``--fresh`` for a
  study, ``--overwrite`` for shards), which the refusal names. Results named by everything that
  changes them (``vitpos eval``'s files) are not earlier results of another run.

Nothing else in a folder is read, followed or touched. :func:`recording` (around every command of
the command line) records the files a command wrote through :func:`vitpos.files.replacing`, within
the files and folders it claimed (:func:`check_outputs`, :func:`clear_earlier`, :func:`claim`).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .errors import VitposError
from .files import check_destination, watch_for_good, watcher, watching, write_atomic

__all__ = [
    "MANIFEST",
    "OutputError",
    "Recorder",
    "recording",
    "continue_recording",
    "current_recorder",
    "claim",
    "record",
    "owners",
    "check_outputs",
    "clear_earlier",
    "start_over",
]

MANIFEST = ".vitpos-manifest.jsonl"
"""The record, in a folder, of the files vitpos commands wrote there."""


class OutputError(VitposError):
    """A command was asked to write where it may not: over a file it did not write, or over its earlier result."""


def _absolute(path: str | Path) -> Path:
    """``path`` made absolute without following links (a link is a file of its own here)."""
    return Path(os.path.abspath(path))


@dataclass
class Recorder:
    """Records the files ``command`` writes in its claimed ``files`` and ``folders`` (a folder's manifest lists the
    files below it); in a ``strict`` folder it refuses to replace a file it did not write."""

    command: str
    files: set[Path] = field(default_factory=set)
    folders: list[Path] = field(default_factory=list)
    strict: list[Path] = field(default_factory=list)
    stale: dict[Path, list[str]] = field(default_factory=dict)
    """Earlier results to delete from a folder when the first new one is written there (a command that fails
    before writing deletes nothing)."""

    def root_of(self, path: Path) -> Path | None:
        """The folder whose manifest records ``path`` (None: ``path`` is not claimed)."""
        path = _absolute(path)
        held = [root for root in self.folders if path.is_relative_to(root)]
        if held:
            return max(held, key=lambda root: len(root.parts))
        return path.parent if path in self.files else None

    def before(self, path: Path) -> None:
        """Refuse a file in a strict folder that exists and that this command did not write; before the first
        new file there, delete the folder's earlier results (``stale``)."""
        path = _absolute(path)
        root = self.root_of(path)
        if path.name == MANIFEST or root is None or not any(path.is_relative_to(f) for f in self.strict):
            return
        if os.path.lexists(path):
            why = _not_own(path, self.command, root)
            if why:
                raise OutputError(f"{why}; it is left as it is: move it away, or choose another folder")
        _remove(root, self.stale.pop(root, []))

    def after(self, path: Path) -> None:
        """Record ``path`` if it was claimed."""
        root = self.root_of(path)
        if root is not None and Path(path).name != MANIFEST:
            record(path, self.command, root)


@contextmanager
def recording(command: str) -> Iterator[None]:
    """Record, for ``command``, the files it writes in what it claims (around a command of the command line)."""
    with watching(Recorder(command)):
        yield


def current_recorder() -> Recorder | None:
    """The recorder of this command (None: nothing is recorded), to hand to its worker processes."""
    found = watcher()
    return found if isinstance(found, Recorder) else None


def continue_recording(recorder: Recorder | None) -> None:
    """In a worker process of a command: record as the command does (a process pool's initializer)."""
    watch_for_good(recorder)


def claim(folder: str | Path, *, strict: bool = False) -> None:
    """Record every file this command writes below ``folder`` in ``folder``'s manifest; ``strict``: refuse to
    replace a file there that it did not write."""
    found = current_recorder()
    if found is not None:  # on the command line (elsewhere nothing is recorded)
        found.folders.append(_absolute(folder))
        if strict:
            found.strict.append(_absolute(folder))


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold ``root``'s lock (writes of several processes into one manifest do not interleave)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def record(path: str | Path, command: str, root: str | Path | None = None) -> None:
    """Record in ``root``'s manifest (default: ``path``'s folder) that ``command`` wrote ``path`` as it is now."""
    path = _absolute(path)
    root = _absolute(root) if root is not None else path.parent
    info = os.lstat(path)
    entry = {
        "name": path.relative_to(root).as_posix(),
        "by": command,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
    }
    with _locked(root):
        fd = os.open(root / MANIFEST, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            size = os.fstat(fd).st_size
            cut = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a line a crash cut short stays one line
            os.write(fd, (("\n" if cut else "") + json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)


def _entries(root: Path) -> dict[str, dict]:
    """The last line of ``root``'s manifest for each name (lines cut by a crash are skipped)."""
    path = root / MANIFEST
    if not path.is_file() or path.is_symlink():
        return {}
    found: dict[str, dict] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and {"name", "by", "size", "mtime_ns"} <= entry.keys() and _below(root, entry):
            found[str(entry["name"])] = entry
    return found


def _below(root: Path, entry: dict) -> bool:
    """Whether the manifest line names a file below ``root`` reached without a link (a line naming anything
    else never counts, so no manifest can lead a command outside its folder)."""
    parts = Path(str(entry["name"])).parts
    if not parts or Path(str(entry["name"])).is_absolute() or ".." in parts:
        return False
    return not any((root / Path(*parts[:i])).is_symlink() for i in range(1, len(parts)))


def owners(folder: str | Path) -> dict[str, str]:
    """``{name below folder: command}`` for each file of ``folder``'s manifest that is still as it was written."""
    root = _absolute(folder)
    found = {}
    for name, entry in _entries(root).items():
        try:
            info = os.lstat(root / name)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and (info.st_size, info.st_mtime_ns) == (entry["size"], entry["mtime_ns"]):
            found[name] = str(entry["by"])
    return found


def _not_own(path: Path, command: str, root: Path) -> str | None:
    """Why the existing ``path`` is not ``command``'s to replace (None: it is)."""
    if path.is_symlink():
        return f"{path} is a link, which vitpos never replaces"
    if not path.is_file():
        return f"{path} is not a regular file"
    by = owners(root).get(path.relative_to(root).as_posix())
    if by is None:
        return f"{path} was not written by vitpos {command} (no record of it in {root / MANIFEST}, or it changed since)"
    if by != command:
        return f"{path} was written by vitpos {by}, not vitpos {command}"
    return None


def check_outputs(paths: Iterable[str | Path], command: str, force: bool, option: str = "--force") -> None:
    """Raise before any work unless ``command`` may write each of ``paths``: a new name, or (with ``force``) a file
    it wrote itself; then record each as it is written."""
    claimed = frozenset(_absolute(p) for p in paths)
    for path in sorted(claimed):
        check_destination(path, folder=False, force=True)  # a folder, or a place that takes no files
        if not os.path.lexists(path):
            continue
        why = _not_own(path, command, path.parent)
        if why:
            raise OutputError(
                f"{why}; {option} replaces only the files vitpos {command} wrote: move it away, or choose another "
                "destination"
            )
        if not force:
            raise OutputError(
                f"{path} holds the result of an earlier vitpos {command}; pass {option} to replace it, or choose "
                "another destination"
            )
    found = current_recorder()
    if found is not None:
        found.files |= claimed


def _listing(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def clear_earlier(folder: str | Path, command: str, force: bool, option: str = "--force") -> None:
    """Before ``command`` writes its results into ``folder``: refuse if it holds the results of an earlier run,
    unless ``force``, which deletes them (and nothing else) as the first new result is written; claim the folder
    (strict)."""
    root = _absolute(folder)
    if root.exists() and not root.is_dir():
        raise OutputError(f"{root} is a file, not a folder; choose another --out")
    own = sorted(name for name, by in owners(root).items() if by == command)
    if own and not force:
        raise OutputError(
            f"{root} holds the results of an earlier vitpos {command} ({_listing(own)}); pass {option} to replace "
            "them, or choose another --out"
        )
    found = current_recorder()
    if found is None:  # nothing is recorded, so nothing waits for the first new file
        _remove(root, own)
        return
    claim(root, strict=True)
    found.stale[root] = own


def _files_below(root: Path) -> list[str]:
    """Every file and link below ``root`` (links are not followed), by name below it."""
    found = []
    for here, folders, files in os.walk(root):
        base = Path(here)
        links = [name for name in folders if (base / name).is_symlink()]
        found += [(base / name).relative_to(root).as_posix() for name in (*files, *links)]
    return sorted(found)


def start_over(folder: str | Path, command: str, option: str) -> None:
    """Delete every file ``command`` wrote below ``folder``, all or nothing: refuse (deleting nothing) while the
    folder holds any other file."""
    root = _absolute(folder)
    if not root.exists():
        return
    if not root.is_dir() or root.is_symlink():
        raise OutputError(f"{option} refuses {root}: it is not a folder; choose another --out")
    own = {name for name, by in owners(root).items() if by == command}
    others = [name for name in _files_below(root) if name not in own and name != MANIFEST]
    if others:
        raise OutputError(
            f"{option} deletes only the files vitpos {command} wrote, and {root} also holds {_listing(others)}, "
            f"which it did not write (no record in {root / MANIFEST}, or changed since); nothing was deleted: move "
            "them away, or choose another --out"
        )
    _remove(root, sorted(own))


def _remove(root: Path, names: list[str]) -> None:
    """Delete ``names`` below ``root``, their lines of its manifest, and the folders below ``root`` they leave empty."""
    if not names:
        return
    with _locked(root):
        for name in names:
            (root / name).unlink(missing_ok=True)
        kept = [entry for key, entry in _entries(root).items() if key not in names]
        with watching(None):
            write_atomic(root / MANIFEST, "".join(json.dumps(entry) + "\n" for entry in kept))
    for name in names:
        for parent in (root / name).parents:
            if parent == root:
                break
            try:
                parent.rmdir()
            except OSError:  # not empty: it holds something else
                break
