"""Write image files as WebDataset shards, replacing an output folder all at once or not at all.

The shards are written into a temporary folder beside the output folder and moved into place
only when every one is complete, so a failed or interrupted run leaves the output folder as it
was, and a replaced folder never keeps stale shards beside new ones. An error, Ctrl-C, SIGTERM or
SIGHUP removes the temporary folder; one left by a killed run (SIGKILL, a power cut) is removed by
the next run into the same folder, which says so. Only files that are its own shards (tar files
of its ``000000000.EXT`` / ``.cls`` samples) and its ``classes.txt`` are ever replaced.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from ..errors import VitposError
from ..processes import alive
from .class_list import read_class_list
from .folders import IMAGE_EXTENSIONS, ImageFiles
from .shards import sample_key

__all__ = ["SHARD_NAME", "check_output_folder", "clear_leftovers", "replacing_folder", "write_shards"]

SHARD_NAME = re.compile(r"(train|val|test)-\d{6}\.tar")
"""The names of the shards ``vitpos shard`` writes."""
SAMPLE_KEY = re.compile(r"\d{9}")
"""The keys of the samples ``vitpos shard`` writes."""
_OWN_FILES = ("classes.txt",)
_RUN_FOLDER_MARKS = ("checkpoints", "config.yaml", "metrics.jsonl", "summary.json")
_LEFTOVER = re.compile(r"\.(?P<out>.+)\.(writing|replaced)-(?P<pid>\d+)")


def _own(name: str) -> bool:
    return bool(SHARD_NAME.fullmatch(name)) or name in _OWN_FILES


def _not_own_shard(path: Path) -> str | None:
    """Why ``path``, named like a shard, is not one ``vitpos shard`` wrote (None: it is one)."""
    if path.is_symlink() or not path.is_file():
        return "it is not a regular file"
    try:
        with tarfile.open(path, "r:") as tar:
            first = [tar.next(), tar.next()]
    except (tarfile.TarError, OSError, EOFError):
        return "it is not a tar file"
    if first[0] is None:
        return "it is an empty tar file"
    keys = [sample_key(m.name) if m is not None else ("", "") for m in first]
    image, label = keys
    if not (SAMPLE_KEY.fullmatch(image[0]) and f".{image[1]}" in IMAGE_EXTENSIONS and label == (image[0], "cls")):
        return f"its first members ({first[0].name} ...) are not an image and its .cls label under a 9-digit key"
    return None


def _not_own(path: Path) -> str | None:
    """Why the file ``path``, named as one of the files ``vitpos shard`` writes, is not one it wrote."""
    if SHARD_NAME.fullmatch(path.name):
        return _not_own_shard(path)
    try:
        read_class_list(path)
    except VitposError as err:
        return str(err).removeprefix(f"class list {path}").lstrip(": ")
    return None


def check_output_folder(out: Path, overwrite: bool) -> None:
    """Refuse an output that is a file, a training run folder, or a folder with files (unless ``overwrite``
    and they are all shards written before)."""
    if out.exists() and not out.is_dir():
        raise VitposError(f"output {out} is a file, not a folder; name a new or empty folder for the shards")
    _check_writable(out)
    found = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    marks = [name for name in _RUN_FOLDER_MARKS if name in found]
    if marks:
        raise VitposError(
            f"output {out} is a training run folder (it holds {', '.join(marks)}); write the shards to a folder of "
            "their own"
        )
    foreign = [name for name in found if not _own(name)]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise VitposError(
            f"output {out} holds {foreign[0]}{more}, which vitpos shard did not write; name a new or empty folder "
            "(nothing was written)"
        )
    if found and not overwrite:
        raise VitposError(
            f"output {out} already holds shards ({found[0]} ...); pass --overwrite to replace them all, or name a new "
            "folder (nothing was written)"
        )
    for name in found:
        why = _not_own(out / name)
        if why is not None:
            raise VitposError(
                f"output {out} holds {name}, which vitpos shard did not write ({why}); --overwrite replaces only its "
                "own shards: name a new or empty folder (nothing was written)"
            )


def _check_writable(out: Path) -> None:
    """Refuse an output that cannot be created, or replaced (its folder, or the folder itself, is read-only)."""
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("/"))
    blocked = [p for p in ([out.parent, out] if out.exists() else [parent]) if not os.access(p, os.W_OK)]
    if blocked:
        raise VitposError(
            f"output {out} cannot be written: {blocked[0]} does not let this process add or rename files "
            "(read-only, immutable or a system folder); name a folder you can write to (nothing was written)"
        )


def clear_leftovers(out: Path) -> list[Path]:
    """Remove the temporary folders beside ``out`` left by runs that were killed (their process is gone)."""
    if not out.parent.is_dir():
        return []
    removed = []
    for path in out.parent.iterdir():
        found = _LEFTOVER.fullmatch(path.name)
        if found is None or found["out"] != out.name or not path.is_dir() or alive(int(found["pid"])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _unwritable(out: Path, err: OSError) -> VitposError:
    return VitposError(
        f"output {out} cannot be written (in {out.parent}: {err.strerror or err}); name a folder you can write to "
        "(nothing was written)"
    )


@contextmanager
def _stopping_on_termination() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`SystemExit` (in the main thread), so cleanup code runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    kept = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


@contextmanager
def replacing_folder(out: Path) -> Iterator[Path]:
    """A fresh temporary folder beside ``out``; on success it becomes ``out`` (the old one removed), on failure it
    is removed and ``out`` is untouched."""
    tmp = out.parent / f".{out.name}.writing-{os.getpid()}"
    old = out.parent / f".{out.name}.replaced-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as err:
        raise _unwritable(out, err) from None
    with _stopping_on_termination():
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            if out.exists():
                os.replace(out, old)
            os.replace(tmp, out)
        except OSError as err:
            if old.exists() and not out.exists():
                os.replace(old, out)
            shutil.rmtree(tmp, ignore_errors=True)
            raise _unwritable(out, err) from None
    shutil.rmtree(old, ignore_errors=True)


def write_shards(
    files: ImageFiles, order: list[int], out: Path, prefix: str, per_shard: int, done: Callable[[], object]
) -> list[Path]:
    """Write the samples of ``files`` in ``order`` into ``out/prefix-000000.tar`` ...: image bytes as they are, and
    .cls; ``done()`` is called after each sample."""
    written = []
    for first in range(0, len(order), per_shard):
        path = out / f"{prefix}-{first // per_shard:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i, index in enumerate(order[first : first + per_shard], start=first):
                image, label = files.samples[index]
                key = f"{i:09d}"
                for name, data in ((f"{key}{image.suffix.lower()}", image.read_bytes()), (f"{key}.cls", b"%d" % label)):
                    member = tarfile.TarInfo(name)
                    member.size, member.mode = len(data), 0o444
                    tar.addfile(member, io.BytesIO(data))
                done()
        written.append(path)
    return written
