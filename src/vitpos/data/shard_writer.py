"""Write image files as WebDataset shards, replacing an output folder all at once or not at all.

The shards are written into a temporary folder beside the output folder and moved into place
only when every one is complete, so a failed or interrupted run leaves the output folder as it
was, and a replaced folder never keeps stale shards beside new ones. An error, Ctrl-C, SIGTERM or
SIGHUP removes the temporary folder; one left by a killed run (SIGKILL, a power cut) is removed by
the next run into the same folder, which says so. Only the files its manifest lists
(:mod:`vitpos.ownership`: the shards and ``classes.txt`` it wrote, unchanged since) are ever
replaced. An output folder that is a link is followed: the shards replace the folder it names, and
the link stays as it is.
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
from ..ownership import MANIFEST, owners, record
from ..processes import alive
from .folders import ImageFiles

__all__ = [
    "SHARD_NAME",
    "COMMAND",
    "output_folder",
    "check_output_folder",
    "clear_leftovers",
    "replacing_folder",
    "write_shards",
]

SHARD_NAME = re.compile(r"(train|val|test)-\d{6}\.tar")
"""The names of the shards ``vitpos shard`` writes."""
COMMAND = "shard"
"""The name ``vitpos shard`` records its files under."""
_RUN_FOLDER_MARKS = ("checkpoints", "config.yaml", "metrics.jsonl", "summary.json")
_LEFTOVER = re.compile(r"\.(?P<out>.+)\.(writing|replaced)-(?P<pid>\d+)")


def output_folder(out: Path) -> Path:
    """The folder the shards go to: ``out``, or the folder it names when it is a link (the link stays)."""
    return out.resolve() if out.is_symlink() else out


def check_output_folder(out: Path, overwrite: bool) -> None:
    """Refuse an output that is a file, a training run folder, or a folder with files (unless ``overwrite``
    and every one is a file ``vitpos shard`` wrote there, as its manifest says)."""
    if out.exists() and not out.is_dir():
        raise VitposError(f"output {out} is a file, not a folder; name a new or empty folder for the shards")
    _check_writable(out)
    found = sorted(p.name for p in out.iterdir() if p.name != MANIFEST) if out.is_dir() else []
    marks = [name for name in _RUN_FOLDER_MARKS if name in found]
    if marks:
        raise VitposError(
            f"output {out} is a training run folder (it holds {', '.join(marks)}); write the shards to a folder of "
            "their own"
        )
    own = owners(out) if found else {}
    foreign = [name for name in found if own.get(name) != COMMAND]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise VitposError(
            f"output {out} holds {', '.join(foreign[:3])}{more}, which vitpos shard did not write (no record of it "
            f"in its {MANIFEST}, or changed since); --overwrite replaces only its own shards: name a new or empty "
            "folder (nothing was written)"
        )
    if found and not overwrite:
        raise VitposError(
            f"output {out} already holds shards ({found[0]} ...); pass --overwrite to replace them all, or name a new "
            "folder (nothing was written)"
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
        if found is None or found["out"] != out.name or path.is_symlink() or not path.is_dir():
            continue  # a link is never this command's to remove
        if not alive(int(found["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
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
        record(path, COMMAND)
        written.append(path)
    return written
