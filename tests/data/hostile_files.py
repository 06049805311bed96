"""Small forged inputs for the hostile-data cases: a decompression-bomb PNG, tar shards, COCO folders,
a sparse safetensors file. Each is a few bytes or sparse on disk, so the cases stay fast."""

from __future__ import annotations

import io
import json
import struct
import tarfile
import zlib
from pathlib import Path

from PIL import Image


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_png(width: int = 20000, height: int = 20000) -> bytes:
    """A 70-byte PNG whose header claims ``width`` x ``height`` RGB pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(b"")) + _png_chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def png(width: int = 32, height: int = 32, shade: int = 90) -> bytes:
    """A real RGB PNG of one colour."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (shade, 255 - shade, 40)).save(out, format="PNG")
    return out.getvalue()


def write_tar(path: Path, samples: list[tuple[str, bytes, bytes]]) -> Path:
    """A WebDataset shard of (key, PNG bytes, label text) samples."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, image, label in samples:
            for name, data in ((f"{key}.png", image), (f"{key}.cls", label)):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return path


def shards(folder: Path, count: int = 2, per_shard: int = 4, label: bytes | None = None) -> Path:
    """``folder/s-0.tar ...``: ``count`` shards of real 32x32 PNGs labelled 0/1 (or all ``label``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(count):
        samples = [(f"{s}{i:03d}", png(shade=20 * i), label or b"%d" % (i % 2)) for i in range(per_shard)]
        write_tar(folder / f"s-{s}.tar", samples)
    return folder


def cut_after(path: Path, samples: int) -> None:
    """Cut a shard of (image, label) member pairs right after its first ``samples`` samples: on a 512-byte
    member boundary, without the zero blocks that end a tar file."""
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    last = members[2 * samples - 1]
    end = last.offset_data + -(-last.size // 512) * 512
    with open(path, "r+b") as f:
        f.truncate(end)


def image_folder(root: Path, per_class: int = 3, size: int = 32) -> Path:
    """``root/train/{a,b}`` and ``root/val/{a,b}`` of real PNGs."""
    for split, count in (("train", per_class), ("val", 1)):
        for c, name in enumerate("ab"):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                (folder / f"{i}.png").write_bytes(png(size, size, 60 * c + 10 * i))
    return root


def coco_folder(root: Path, images: list[dict], categories: list[dict] | None = None) -> Path:
    """A COCO folder whose train and val files list ``images`` (each with one box), their files real 32x32 PNGs
    under ``images/``."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "images").mkdir(exist_ok=True)
    for image in images:
        target = root / "images" / image["file_name"]
        if target.resolve().is_relative_to((root / "images").resolve()):
            target.write_bytes(png())
    data = {
        "images": [{"width": 32, "height": 32} | image for image in images],
        "annotations": [
            {"id": n, "image_id": image["id"], "category_id": 1, "bbox": [2, 2, 8, 8], "iscrowd": 0}
            for n, image in enumerate(images)
        ],
        "categories": categories or [{"id": 1, "name": "square"}],
    }
    for split in ("train", "val"):
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(data))
    return root


def sparse_safetensors(path: Path, nbytes: int) -> Path:
    """A safetensors file with a consistent header for one float32 tensor of ``nbytes``, its data a sparse hole."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [nbytes // 4], "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + nbytes)
    return path


def write_members(path: Path, members: list[tuple[str, bytes | str]]) -> Path:
    """A tar file of ``members``: (name, bytes) a regular file, (name, "->target") a symbolic link."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            member = tarfile.TarInfo(name)
            if isinstance(data, str):
                member.type, member.linkname = tarfile.SYMTYPE, data.removeprefix("->")
                tar.addfile(member)
            else:
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return path
