"""Weights by name: ``create_model(NAME, pretrained=True)`` downloads into the cache, verifies and loads.

The files come from an HTTP server on 127.0.0.1 run by the test (it stops by itself after a
deadline); the published URLs are swapped for its own.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.cli import main
from vitpos.weights import pretrained
from vitpos.weights.pretrained import RELEASES, Release

from . import layouts
from .conftest import images, save_pth
from .rope_vit_reference import rope_vit_file
from .swin_v2_reference import swinv2_state

SMALL = dict(embed_dim=16, depth=1, num_heads=2, patch_size=4, img_size=16, num_classes=5)
NAME = "deit_tiny_patch16_224"
DEADLINE_S = 60.0


class Server:
    """Serves ``files`` at /files/NAME, a cut-short copy at /truncated/NAME, a redirect at /redirect/NAME."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append(self.path)
                kind, _, name = self.path.strip("/").partition("/")
                if name not in owner.files:
                    self.send_error(404)
                    return
                if kind == "redirect":
                    self.send_response(302)
                    self.send_header("Location", f"/files/{name}")
                    self.end_headers()
                    return
                data = owner.files[name]
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2] if kind == "truncated" else data)

            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 0.2
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not self.stop.is_set() and time.monotonic() < deadline:
            self.httpd.handle_request()
        self.httpd.server_close()

    def url(self, kind: str, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{kind}/{name}"

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server()
    try:
        yield served
    finally:
        served.close()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("VITPOS_CACHE", str(folder))
    monkeypatch.delenv("VITPOS_OFFLINE", raising=False)
    return folder


@pytest.fixture
def released(tmp_path) -> tuple[Path, str]:
    """A DeiT-layout file and its torch.hub-style name (with its SHA-256 prefix)."""
    sd = layouts.timm_vit(layouts.Filler(51), dim=16, depth=1, patch=4, grid=4, classes=5)
    path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "weights.pth")
    prefix = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    return path, f"{NAME}-{prefix}.pth"


def publish(monkeypatch, url: str, sha256: str | None = None) -> None:
    monkeypatch.setitem(RELEASES, NAME, Release(url, "test", sha256))


def same_model(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    x = images(16, batch=1).float()
    with torch.no_grad():
        return torch.equal(a.eval()(x), b.eval()(x))


def test_a_good_file_is_downloaded_once_verified_and_loaded(server, cache, released, monkeypatch):
    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("files", name))
    model = vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert same_model(model, vitpos.create_model(NAME, checkpoint=path, **SMALL))
    assert sorted(p.name for p in cache.iterdir()) == [name]
    vitpos.create_model(NAME, pretrained=True, **SMALL)  # the second time from the cache
    assert len(server.requests) == 1


def test_a_redirect_is_followed(server, cache, released, monkeypatch):
    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("redirect", name))
    model = vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert same_model(model, vitpos.create_model(NAME, checkpoint=path, **SMALL))
    assert [r.split("/")[1] for r in server.requests] == ["redirect", "files"]


def test_a_file_whose_hash_differs_from_its_name_is_refused_and_not_kept(server, cache, released, monkeypatch):
    path, name = released
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one byte changed in transit
    server.files[name] = bytes(data)
    publish(monkeypatch, server.url("files", name))
    with pytest.raises(vitpos.CheckpointError, match=rf"SHA-256 [0-9a-f]{{64}} does not start with {name[-12:-4]}"):
        vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_full_published_hash_is_checked(server, cache, released, monkeypatch):
    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("files", name), sha256="0" * 64)
    with pytest.raises(vitpos.CheckpointError, match=r"is not the published 0{64}"):
        vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert list(cache.iterdir()) == []
    publish(monkeypatch, server.url("files", name), sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    assert same_model(
        vitpos.create_model(NAME, pretrained=True, **SMALL), vitpos.create_model(NAME, checkpoint=path, **SMALL)
    )


def test_a_truncated_transfer_is_an_error_that_leaves_no_file(server, cache, released, monkeypatch):
    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("truncated", name))
    with pytest.raises(vitpos.CheckpointError, match=rf"{name}.*nothing was cached"):
        vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert list(cache.iterdir()) == []


def test_offline_uses_the_cache_only(server, cache, released, monkeypatch):
    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("files", name))
    monkeypatch.setenv("VITPOS_OFFLINE", "1")
    with pytest.raises(vitpos.CheckpointError, match=rf"{name} is not in the cache .*VITPOS_OFFLINE"):
        vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert server.requests == []
    monkeypatch.delenv("VITPOS_OFFLINE")
    first = vitpos.create_model(NAME, pretrained=True, **SMALL)
    server.close()  # nothing to download from now on
    monkeypatch.setenv("VITPOS_OFFLINE", "1")
    assert same_model(vitpos.create_model(NAME, pretrained=True, **SMALL), first)
    assert len(server.requests) == 1


def test_a_preset_without_released_weights_is_a_clear_error(cache):
    with pytest.raises(vitpos.CheckpointError, match=r"'thesis_vit' has no released weights; presets with weights: "):
        vitpos.create_model("thesis_vit", pretrained=True)


def test_every_release_names_a_preset_and_a_file():
    assert set(RELEASES) <= set(vitpos.list_models())
    for name, release in RELEASES.items():
        assert release.url.startswith("https://"), name
        assert release.url.endswith(".pth") or release.filename == f"{name}.bin", name
    cached = [release.filename or release.url.rsplit("/", 1)[-1] for release in RELEASES.values()]
    assert len(set(cached)) == len(cached)  # every file has its own name in the cache
    assert pretrained.pretrained_models() == sorted(RELEASES)


def test_the_models_command_lists_the_presets_with_weights(capsys):
    assert main(["models", "--pretrained"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == sorted(RELEASES)
    assert all(row.split()[-1] == RELEASES[row.split()[0]].url for row in rows)


def test_files_published_under_one_name_are_cached_under_their_models(server, cache, tmp_path, monkeypatch):
    names = []
    for kind in ("axial", "mixed"):
        name = f"rope_{kind}_deit_small_patch16_LS"  # RoPE-ViT's files all end in pytorch_model.bin
        sd = rope_vit_file(
            layouts.Filler(7), dim=16, depth=1, heads=2, grid=4, classes=5, mixed=kind == "mixed", ape=False, patch=4
        )
        path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / f"{kind}.bin")
        server.files[f"{name}/pytorch_model.bin"] = path.read_bytes()
        url = server.url("files", f"{name}/pytorch_model.bin")
        monkeypatch.setitem(RELEASES, name, Release(url, "test", filename=f"{name}.bin"))
        model = vitpos.create_model(name, pretrained=True, **SMALL)
        assert same_model(model, vitpos.create_model(name, checkpoint=path, **SMALL))
        names.append(f"{name}.bin")
    assert sorted(p.name for p in cache.iterdir()) == sorted(names)


def test_a_partial_download_of_a_killed_process_is_removed(server, cache, released, monkeypatch, capsys):
    """A process killed mid-transfer leaves ``.NAME.part-PID``; the next download removes it, and says so, but
    not the part file of a process still running."""
    import subprocess
    import sys

    path, name = released
    server.files[name] = path.read_bytes()
    publish(monkeypatch, server.url("files", name))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cache.mkdir()
    killed, running = cache / f".{name}.part-{gone.pid}", cache / f".{name}.part-1"  # pid 1 always runs
    for part in (killed, running):
        part.write_bytes(b"half a file")
    vitpos.create_model(NAME, pretrained=True, **SMALL)
    assert sorted(p.name for p in cache.iterdir()) == sorted([name, running.name])
    assert f"removed {killed}, the partial download of a process that was stopped" in capsys.readouterr().err


def test_a_swinv2_release_in_microsofts_layout_loads_by_name(server, cache, tmp_path, monkeypatch):
    small = dict(embed_dims=(8, 16), depths=(2, 2), num_heads=(1, 2), mlp_ratios=(4.0, 4.0), window_size=4)
    small |= dict(patch_size=2, img_size=16, num_classes=5)  # a two-stage swinv2_tiny_window8_256
    sd = swinv2_state(layouts.Filler(52), (8, 16), (2, 2), (1, 2), 4, 2, (16, 16), 5)
    path = save_pth({k: v.float() if v.is_floating_point() else v for k, v in sd.items()}, tmp_path / "v2.pth")
    name = "swinv2_tiny_patch4_window8_256.pth"
    server.files[name] = path.read_bytes()
    monkeypatch.setitem(RELEASES, "swinv2_tiny_window8_256", Release(server.url("files", name), "test"))
    model = vitpos.create_model("swinv2_tiny_window8_256", pretrained=True, **small)
    assert same_model(model, vitpos.create_model("swinv2_tiny_window8_256", checkpoint=path, **small))
    assert [p.name for p in cache.iterdir()] == [name]
