"""Released weights from the command line: ``--pretrained``, or a preset's name or URL where a checkpoint goes.

No network is used: ``urlopen`` fails as it does offline, and the released file is placed in the
cache by hand (DeiT's layout at a tiny size, named with its SHA-256 prefix as the release is),
with the preset made as tiny so every command can run it.
"""

from __future__ import annotations

import hashlib
import urllib.error
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import vitpos
from vitpos.cli import main
from vitpos.registry import MODELS
from vitpos.weights import download
from vitpos.weights.pretrained import RELEASES, Release

from . import layouts
from .conftest import save_pth

NAME = "deit_tiny_patch16_224"
TINY = dict(embed_dim=16, depth=1, num_heads=2, patch_size=4, img_size=16, num_classes=4)
DATA = "synthetic:direction4:img=16:train=64:val=32:test=32"


def _no_network(*args: object, **kwargs: object) -> None:
    raise urllib.error.URLError("[Errno -2] Name or service not known")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty weights cache, no network, and the preset at a tiny size."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("VITPOS_CACHE", str(folder))
    monkeypatch.delenv("VITPOS_OFFLINE", raising=False)
    monkeypatch.setattr(download.urllib.request, "urlopen", _no_network)
    monkeypatch.setitem(MODELS._filled, NAME, vitpos.get_config(NAME, **TINY))
    monkeypatch.chdir(tmp_path)
    return folder


@pytest.fixture
def placed(cache, tmp_path, monkeypatch) -> str:
    """The release's file placed in the cache by hand; its URL (published under the name the file has)."""
    sd = layouts.timm_vit(layouts.Filler(7), dim=16, depth=1, patch=4, grid=4, classes=4)
    made = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "made.pth")
    name = f"{NAME}-{hashlib.sha256(made.read_bytes()).hexdigest()[:8]}.pth"
    cache.mkdir()
    made.rename(cache / name)
    url = f"https://dl.example.org/deit/{name}"
    monkeypatch.setitem(RELEASES, NAME, Release(url, "test"))
    return url


def test_offline_with_an_empty_cache_train_ends_in_one_line_naming_the_url_and_the_cache(cache, capsys):
    assert (
        main(["train", "--model", NAME, "--pretrained", "--data", DATA, "--batch-size", "16", "--run-dir", "none"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    url = RELEASES[NAME].url
    assert err[-1].startswith(f"vitpos train: error: downloading {url} failed"), err
    assert f"place the file in the cache folder {cache} by hand, named {Path(url).name}" in err[-1]
    assert not any(cache.iterdir())  # nothing half-written is left


def test_vitpos_offline_names_the_url_and_the_cache_too(cache, capsys, monkeypatch):
    monkeypatch.setenv("VITPOS_OFFLINE", "1")
    assert main(["convert", NAME, "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        f"is not in the cache {cache} and VITPOS_OFFLINE is set; download {RELEASES[NAME].url} into that folder, "
        "or unset VITPOS_OFFLINE"
    )


def test_train_pretrained_starts_from_the_file_in_the_cache(placed, cache, tmp_path, capsys):
    def run(name: str, *options: str) -> dict[str, torch.Tensor]:
        command = ["train", "--model", NAME, "--data", DATA, "--batch-size", "16", "--epochs", "1", "--run-dir", name]
        assert main([*command, *options]) == 0
        return load_file(next((tmp_path / name).glob("checkpoints/step-*/model.safetensors")))

    pretrained = run("by-flag", "--pretrained")
    assert "init: deit_tiny_patch16_224" in (tmp_path / "by-flag" / "config.yaml").read_text()  # the name, portable
    by_name = run("by-name", "--init", NAME)
    by_file = run("by-file", "--init", str(next(cache.iterdir())))
    fresh = run("fresh")
    for key, value in pretrained.items():
        assert torch.equal(value, by_name[key]) and torch.equal(value, by_file[key]), key
    assert not torch.equal(pretrained["stages.0.absolute.table"], fresh["stages.0.absolute.table"])


def test_convert_takes_a_preset_its_url_or_model_and_pretrained(placed, tmp_path, capsys):
    assert main(["convert", NAME, "by-name"]) == 0
    (tmp_path / NAME).mkdir()  # a folder of the preset's name: a path, but not with --pretrained
    assert main(["convert", "--pretrained", NAME, "by-flag"]) == 0
    assert main(["convert", placed, "--model", NAME, "by-url"]) == 0
    out = capsys.readouterr().out
    assert f"{placed} (timm-vit layout) -> by-url" in out  # the URL as given, not https:/...
    weights = [load_file(tmp_path / name / "model.safetensors") for name in ("by-name", "by-flag", "by-url")]
    assert weights[0].keys() == weights[1].keys() == weights[2].keys()
    assert all(torch.equal(w[k], weights[0][k]) for w in weights[1:] for k in weights[0])
    assert main(["convert", NAME, "by-path"]) == 2  # without --pretrained the folder is meant
    assert "holds no checkpoint" in capsys.readouterr().err


def test_eval_of_released_weights_prints_and_writes_only_with_out(placed, tmp_path, capsys):
    assert main(["eval", "--model", NAME, "--pretrained", "--data", DATA]) == 0
    out = capsys.readouterr().out
    assert "released weights have no run folder" in out and "wrote" not in out
    assert main(["eval", "--checkpoint", placed, "--data", DATA, "--out", "released.json"]) == 0
    assert (tmp_path / "released.json").is_file() and (tmp_path / "released.md").is_file()
    assert main(["eval", "--pretrained", "--data", DATA]) == 2  # --pretrained needs --model


def test_export_pretrained_equals_the_released_model(placed, tmp_path):
    assert main(["export", "--model", NAME, "--pretrained", "--min-size", "16", "--max-size", "32", "m.pt2"]) == 0
    deployed = vitpos.deploy.load_deployed(tmp_path / "m.pt2")
    released = vitpos.create_model(NAME, pretrained=True).eval()
    x = torch.randn(2, 3, 16, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(deployed(x), released(x))
