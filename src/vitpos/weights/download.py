"""Download a released weights file into the cache, verified, with the standard library only.

The cache folder is ``VITPOS_CACHE``, else ``$XDG_CACHE_HOME/vitpos``, else ``~/.cache/vitpos``;
a file is kept under the name its URL ends with. A download is written to a temporary file
beside the final one, checked, and renamed into place only when whole and verified, so a
failed, interrupted or tampered transfer leaves no file behind. Verified: the byte count the
server announced, the SHA-256 prefix the file name carries (``name-<hex>.pth``, torch.hub's
convention) and the full SHA-256 where the publisher states one. ``VITPOS_OFFLINE=1`` uses the
cache only.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urlparse

from ..errors import CheckpointError

__all__ = ["cache_dir", "download", "expected_prefix", "offline"]

HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,64})\.")
"""torch.hub's convention: ``deit_small_patch16_224-cd65a155.pth`` starts its SHA-256 with ``cd65a155``."""
CHUNK = 1 << 20
TIMEOUT_S = 60.0


def cache_dir() -> Path:
    """Where downloaded weights are kept."""
    if os.environ.get("VITPOS_CACHE"):
        return Path(os.environ["VITPOS_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vitpos"


def offline() -> bool:
    """True when ``VITPOS_OFFLINE`` is set to a true value: nothing is downloaded."""
    return os.environ.get("VITPOS_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def expected_prefix(filename: str) -> str | None:
    """The SHA-256 prefix a file name carries, or None."""
    match = HASH_IN_NAME.search(filename)
    return match.group(1) if match else None


def download(url: str, sha256: str | None = None) -> Path:
    """The cached copy of ``url``, downloaded and verified first if it is not there."""
    filename = Path(urlparse(url).path).name
    if not filename:
        raise CheckpointError(f"URL {url} names no file")
    folder = cache_dir()
    final = folder / filename
    if final.is_file():
        return final
    if offline():
        raise CheckpointError(
            f"{filename} is not in the cache {folder} and VITPOS_OFFLINE is set; download {url} into that folder, "
            "or unset VITPOS_OFFLINE"
        )
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{filename}.part-{os.getpid()}"
    try:
        digest = _fetch(url, tmp)
        _verify(url, filename, digest, sha256)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _fetch(url: str, dst: Path) -> str:
    """Write ``url`` to ``dst``; the SHA-256 of what arrived. Raises if the transfer is cut short."""
    print(f"downloading {url} to {cache_dir()}", file=sys.stderr)
    digest = hashlib.sha256()
    received = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(dst, "wb") as out:
            announced = response.headers.get("Content-Length")
            while chunk := response.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
    except (urllib.error.URLError, HTTPException, OSError) as err:
        raise CheckpointError(
            f"downloading {url} failed ({type(err).__name__}: {err}); nothing was cached. Without a network, fetch "
            f"that file elsewhere, place it in the cache {cache_dir()} as {Path(urlparse(url).path).name} "
            "and set VITPOS_OFFLINE=1 to use the cache only"
        ) from None
    if announced is not None and received != int(announced):
        raise CheckpointError(
            f"downloading {url} stopped after {received} of {announced} bytes; nothing was cached, try again"
        )
    return digest.hexdigest()


def _verify(url: str, filename: str, digest: str, sha256: str | None) -> None:
    prefix = expected_prefix(filename)
    if prefix is not None and not digest.startswith(prefix):
        raise CheckpointError(
            f"{url}: the file's SHA-256 {digest} does not start with {prefix}, which its name promises; the download "
            "is damaged or not the published file. Nothing was cached"
        )
    if sha256 is not None and digest != sha256.lower():
        raise CheckpointError(
            f"{url}: the file's SHA-256 {digest} is not the published {sha256}; the download is damaged or not the "
            "published file. Nothing was cached"
        )
