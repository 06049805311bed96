"""Check a COCO annotation file's images and boxes before any is read, naming the file and the entry.

A hand-edited or converted file can hold a box as strings, with three numbers or NaN, or an
image whose ``width`` is missing or ``"wide"``; each is an error naming the annotation (or
image) id and what to write instead, rather than a ``ValueError`` from deep inside the loader.
So are two images or two categories with one id (the index would keep one silently and give
its boxes to the other) and a ``file_name`` that leaves the image folder (absolute, or with ``..``).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, TypeGuard

from ..errors import VitposError, quote

__all__ = ["check_coco_entries"]


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _entries(file: Path, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise VitposError(f"{file}: {key!r} must be a list of objects, got {quote(entries)}")
    return entries


def _leaves_folder(name: str) -> bool:
    parts = [PurePosixPath(name), PureWindowsPath(name)]
    return any(p.is_absolute() or p.drive or p.root or ".." in p.parts for p in parts)


def _check_unique_ids(file: Path, key: str, entries: list[dict[str, Any]]) -> None:
    counts = Counter(quote(e.get("id")) for e in entries)
    repeated = [(ident, n) for ident, n in counts.items() if n > 1]
    if repeated:
        ident, n = repeated[0]
        what = key[:-1] if key == "images" else "category"
        raise VitposError(
            f"{file}: {n} {key} have id {ident} ({len(repeated)} id(s) repeated in all); give each {what} an id of its "
            "own, and point the annotations at the right one"
        )


def check_coco_entries(file: Path, data: dict[str, Any]) -> None:
    """Raise :class:`VitposError` for the first image or annotation of ``data`` (read from ``file``)
    whose size or box the loader cannot use."""
    for image in _entries(file, data, "images"):
        for field in ("width", "height"):
            value = image.get(field)
            if not (_is_number(value) and value > 0):
                what = "is missing" if field not in image else f"is {quote(value)}"
                raise VitposError(
                    f"{file}: image {quote(image.get('id'))} ({image.get('file_name', 'no file_name')}): its {field} "
                    f"{what}; give the image's {field} in pixels as a number > 0"
                )
        if not isinstance(image.get("file_name"), str):
            raise VitposError(f"{file}: image {quote(image.get('id'))} has no file_name; give the image's file name")
        if _leaves_folder(image["file_name"]):
            raise VitposError(
                f"{file}: image {quote(image.get('id'))} has file_name {quote(image['file_name'])}, which leaves the "
                "image folder; give a path inside it (no leading / and no ..)"
            )
    for key in ("images", "categories"):
        _check_unique_ids(file, key, _entries(file, data, key))
    for ann in _entries(file, data, "annotations"):
        box = ann.get("bbox")
        if "bbox" not in ann:
            problem = "has no bbox"
        elif not isinstance(box, list) or len(box) != 4:
            problem = f"has bbox {quote(box)}, not a list of 4 numbers"
        elif not all(_is_number(v) for v in box):
            problem = f"has bbox {quote(box)} with a value that is not a finite number"
        elif box[2] < 0 or box[3] < 0:
            problem = f"has bbox {quote(box)} of negative width or height"
        else:
            continue
        raise VitposError(
            f"{file}: annotation {quote(ann.get('id'))} (image {quote(ann.get('image_id'))}) {problem}; "
            "write it as [x, y, width, height] in pixels"
        )
