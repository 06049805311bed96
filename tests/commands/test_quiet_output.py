"""What commands print besides their results: no library noise, no broken-pipe trace, a fast listing."""

import json
import os
import subprocess
import sys
import urllib.error
import warnings

import pytest

from vitpos.cli import main
from vitpos.commands.models import registry_rows, released_urls
from vitpos.commands.preset_table import PRESETS, RELEASED
from vitpos.errors import CheckpointError


def test_the_preset_table_matches_the_registry():
    # regenerate with `python -m vitpos.commands.models` when this fails
    assert registry_rows() == PRESETS and released_urls() == RELEASED


@pytest.mark.parametrize("flags", [[], ["--pretrained"]])
def test_listing_models_imports_no_torch(flags):
    code = f"import sys; from vitpos.cli import main; main(['models', 'deit', *{flags}]); print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    assert lines[-1] == "False"
    assert any(line.split()[:2] == ["deit_tiny_patch16_224", "5,717,416"] for line in lines)


def test_a_closed_pipe_ends_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone, as `head` does
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vitpos", "models"], stdout=write_end, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def _warning_command(monkeypatch, emit):
    def run(args):
        emit()
        return 0

    monkeypatch.setattr("vitpos.commands.models.run", run)


def test_known_library_warnings_are_not_printed(monkeypatch, capsys):
    def emit():
        warnings.warn_explicit(
            "`isinstance(treespec, LeafSpec)` is deprecated, use `treespec.is_leaf()` instead.",
            FutureWarning,
            json.__file__,
            1,
        )

    _warning_command(monkeypatch, emit)
    assert main(["models"]) == 0
    assert capsys.readouterr().err == ""


def test_other_library_warnings_name_their_module(monkeypatch, capsys):
    _warning_command(monkeypatch, lambda: warnings.warn_explicit("a library's note", UserWarning, json.__file__, 1))
    assert main(["models"]) == 0
    assert capsys.readouterr().err == "vitpos models: warning from json (UserWarning): a library's note\n"


def test_vitpos_warnings_go_under_the_command(monkeypatch, capsys):
    import vitpos.cli

    _warning_command(monkeypatch, lambda: warnings.warn_explicit("our note", UserWarning, vitpos.cli.__file__, 1))
    assert main(["models"]) == 0
    assert capsys.readouterr().err == "vitpos models: warning: our note\n"


def test_the_coco_fixture_says_what_it_wrote(tmp_path, capsys):
    from bench.data.coco_fixture import main as write

    write([str(tmp_path / "coco"), "--train", "2", "--val", "1"])
    out = capsys.readouterr().out
    assert "wrote 2 training and 1 validation images" in out and f"coco:{tmp_path / 'coco'}" in out
    assert len(list((tmp_path / "coco" / "train2017").iterdir())) == 2


def test_a_failed_download_says_how_to_work_offline(tmp_path, monkeypatch):
    from vitpos.weights import download as fetching

    def refuse(*args, **kwargs):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setenv("VITPOS_CACHE", str(tmp_path))
    monkeypatch.delenv("VITPOS_OFFLINE", raising=False)
    monkeypatch.setattr(fetching.urllib.request, "urlopen", refuse)
    with pytest.raises(CheckpointError) as err:
        fetching.download("https://example.org/weights/model-0123abcd.pth")
    message = str(err.value)
    assert (
        "VITPOS_OFFLINE=1" in message and f"in the cache folder {tmp_path} by hand, named model-0123abcd.pth" in message
    )
    assert list(tmp_path.iterdir()) == []
