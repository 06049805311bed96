"""Write image files as WebDataset shards, replacing an output folder all at once or not at all.

The shards are written into a temporary folder beside the output folder and moved into place
only when every one is complete, so a failed or interrupted run leaves the output folder as it
was, and a replaced folder never keeps stale shards beside new ones.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import VitposError
from .folders import ImageFiles

__all__ = ["SHARD_NAME", "check_output_folder", "replacing_folder", "write_shards"]

SHARD_NAME = re.compile(r"(train|val|test)-\d{6}\.tar")
"""The names of the shards ``vitpos shard`` writes."""
_OWN_FILES = ("classes.txt",)
_RUN_FOLDER_MARKS = ("checkpoints", "config.yaml", "metrics.jsonl", "summary.json")


def _own(name: str) -> bool:
    return bool(SHARD_NAME.fullmatch(name)) or name in _OWN_FILES


def check_output_folder(out: Path, overwrite: bool) -> None:
    """Refuse an output that is a file, a training run folder, or a folder with files (unless ``overwrite``
    and they are all shards written before)."""
    if out.exists() and not out.is_dir():
        raise VitposError(f"output {out} is a file, not a folder; name a new or empty folder for the shards")
    if not out.is_dir():
        return
    found = sorted(p.name for p in out.iterdir())
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


@contextmanager
def replacing_folder(out: Path) -> Iterator[Path]:
    """A fresh temporary folder beside ``out``; on success it becomes ``out`` (the old one removed), on failure it
    is removed and ``out`` is untouched."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.writing-{os.getpid()}"
    old = out.parent / f".{out.name}.replaced-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
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
