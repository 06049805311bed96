"""Download a released weights file into the cache, verified, with the standard library only.

The cache folder is ``VITPOS_CACHE``, else ``$XDG_CACHE_HOME/vitpos``, else ``~/.cache/vitpos``;
a file is kept under the name its URL ends with. A download is written to a temporary file
beside the final one, checked, and renamed into place only when whole and verified, so a
failed, interrupted or tampered transfer leaves no file behind (the partial file of a process
killed mid-transfer is removed by the next download of that file, which says so). Verified: the byte count the
server announced, the SHA-256 prefix the file name carries (``name-<hex>.pth``, torch.hub's
convention) and the full SHA-256 where the publisher states one. A cached file is verified the
same way every time it is used: a file placed in the cache by hand (on a machine without a
network) is used when it passes, and a wrong or damaged one is an error saying to delete it, never
loaded. ``VITPOS_OFFLINE=1`` (or ``true``) uses the cache only; ``0``, ``false`` or unset downloads
what is missing.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import sys
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urlparse

from ..errors import CheckpointError, ConfigError
from ..processes import alive

__all__ = ["cache_dir", "download", "expected_prefix", "offline"]

HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,64})\.")
"""torch.hub's convention: ``deit_small_patch16_224-cd65a155.pth`` starts its SHA-256 with ``cd65a155``."""
CHUNK = 1 << 20
TIMEOUT_S = 60.0


def cache_dir() -> Path:
    """Where downloaded weights are kept."""
    if os.environ.get("VITPOS_CACHE"):
        folder = Path(os.environ["VITPOS_CACHE"]).expanduser()
        named = "VITPOS_CACHE"
    else:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vitpos"
        named = "the weights cache"
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{named} {folder} is a file, not a folder; point VITPOS_CACHE at a folder")
    return folder


_SWITCH = {"": False, "0": False, "false": False, "1": True, "true": True}


def offline() -> bool:
    """True when ``VITPOS_OFFLINE`` is 1 or true: nothing is downloaded; 0, false or unset: missing files are."""
    text = os.environ.get("VITPOS_OFFLINE", "")
    value = _SWITCH.get(text.strip().lower())
    if value is None:
        raise ConfigError(
            f"VITPOS_OFFLINE={text[:40]!r} is not allowed: set it to 1 or true to use the weights cache only, or to "
            "0 or false (or unset it) to download missing files"
        )
    return value


def expected_prefix(filename: str) -> str | None:
    """The SHA-256 prefix a file name carries, or None."""
    match = HASH_IN_NAME.search(filename)
    return match.group(1) if match else None


def download(url: str, sha256: str | None = None, filename: str | None = None) -> Path:
    """The cached copy of ``url``, downloaded and verified first if it is not there; kept as ``filename``
    (default: the name the URL ends with), for files published under one name for every model."""
    filename = filename or Path(urlparse(url).path).name
    if not filename:
        raise CheckpointError(f"URL {url} names no file")
    folder = cache_dir()
    final = folder / filename
    if final.is_file():
        _verify(
            f"the cached file {final}",
            filename,
            _sha256(final),
            sha256,
            f"delete {final} and load again to download it afresh",
        )
        return final
    if offline():
        raise CheckpointError(
            f"{filename} is not in the cache {folder} and VITPOS_OFFLINE is set; download {url} into that folder, "
            "or unset VITPOS_OFFLINE"
        )
    folder.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder, filename)
    tmp = folder / f".{filename}.part-{os.getpid()}"
    try:
        digest = _fetch(url, tmp, filename)
        _verify(url, filename, digest, sha256, "the download is damaged or not the published file. Nothing was cached")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _remove_leftovers(folder: Path, filename: str) -> None:
    """Remove the partial downloads of ``filename`` whose process was killed mid-transfer, saying so."""
    for part in folder.glob(f".{glob.escape(filename)}.part-*"):
        pid = part.name.rpartition("-")[2]
        if pid.isdigit() and part.is_file() and not part.is_symlink() and not alive(int(pid)):
            part.unlink(missing_ok=True)
            print(f"removed {part}, the partial download of a process that was stopped", file=sys.stderr)


def _fetch(url: str, dst: Path, filename: str) -> str:
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
            f"that URL elsewhere and place the file in the cache folder {cache_dir()} by hand, named {filename}: it is "
            "checked against its hash and used from there (VITPOS_OFFLINE=1 then keeps vitpos off the network)"
        ) from None
    if announced is not None and received != int(announced):
        raise CheckpointError(
            f"downloading {url} stopped after {received} of {announced} bytes; nothing was cached, try again"
        )
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(what: str, filename: str, digest: str, sha256: str | None, fix: str) -> None:
    """Raise if ``digest`` is not what the file name's prefix or the published ``sha256`` promise."""
    prefix = expected_prefix(filename)
    if prefix is not None and not digest.startswith(prefix):
        raise CheckpointError(
            f"{what}: the file's SHA-256 {digest} does not start with {prefix}, which its name promises; {fix}"
        )
    if sha256 is not None and digest != sha256.lower():
        raise CheckpointError(f"{what}: the file's SHA-256 {digest} is not the published {sha256}; {fix}")
