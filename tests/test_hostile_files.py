"""Hostile files: an exported program altered to run code on loading is refused and runs nothing; a weights
file damaged in the cache, or whose header states more tensor bytes than it should, is refused."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import re
import shutil
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import vitpos
from vitpos.deploy import export_model, load_deployed, metadata_path
from vitpos.errors import CheckpointError, VitposError
from vitpos.weights import download
from vitpos.weights.memory import safetensors_bytes


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A real ``vitpos export`` of a one-block model: ``model.pt2`` beside ``model.pt2.yaml``."""
    path = tmp_path_factory.mktemp("export") / "model.pt2"
    torch.manual_seed(0)
    model = vitpos.create_model("thesis_vit", img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2)
    export_model(model.eval(), path, fmt="pt2", min_size=16, max_size=32)
    return path


class _Marker:
    """A pickle that writes ``path`` when unpickled without ``weights_only``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch '{self.path}'",))


def _altered(exported: Path, tmp_path: Path, change) -> Path:
    """A copy of ``exported`` (and its YAML) with ``change(name, bytes) -> bytes | None`` applied to
    each member (None drops it); ``change("", b"")`` may return extra members as a dict."""
    out = tmp_path / "model.pt2"
    shutil.copy(metadata_path(exported), metadata_path(out))
    with zipfile.ZipFile(exported) as src, zipfile.ZipFile(out, "w") as dst:
        root = src.namelist()[0].split("/")[0]
        for info in src.infolist():
            data = change(info.filename.split("/", 1)[1], src.read(info.filename))
            if data is not None:
                dst.writestr(info, data)
        for name, data in (change("", b"") or {}).items():
            dst.writestr(f"{root}/{name}", data)
    return out


def _replace(member: str, new):
    return lambda name, data: (new(data) if name == member else data) if name else None


def _json_edit(member: str, edit):
    def change(data: bytes) -> bytes:
        doc = json.loads(data)
        edit(doc)
        return json.dumps(doc).encode()

    return _replace(member, change)


def _first_node(doc) -> dict:
    return doc["graph_module"]["graph"]["nodes"][0]


def _pickled_weight(marker: Path):
    def change(name: str, data: bytes):
        if name == "":
            return {"data/weights/weight_999": pickle.dumps(_Marker(marker))}
        if name == "data/weights/model_weights_config.json":
            doc = json.loads(data)
            entry = next(iter(doc["config"].values()))
            entry.update(path_name="weight_999", use_pickle=True)
            return json.dumps(doc).encode()
        return data

    return change


HOSTILE = [
    (
        "pickled sample inputs",
        lambda m: _replace("data/sample_inputs/model.pt", lambda d: pickle.dumps(_Marker(m))),
        r"its sample inputs hold objects other than tensors",
    ),
    ("pickled weight", _pickled_weight, r"model_weights_config.json: .* is stored as a pickle"),
    (
        "extra member",
        lambda m: lambda name, data: {"data/payload.pkl": pickle.dumps(_Marker(m))} if not name else data,
        r"unexpected member\(s\) '.*data/payload.pkl'",
    ),
    (
        "node calls os.system",
        lambda m: _json_edit("models/model.json", lambda d: _first_node(d).update(target="torch.os.system")),
        r"the program calls 'torch.os.system', not an ATen operator",
    ),
    (
        "guard runs Python",
        lambda m: _json_edit(
            "models/model.json", lambda d: d.update(guards_code=[f"__import__('os').system('touch {m}')"])
        ),
        r"the guard \"__import__\('os'\).* is not arithmetic on input sizes",
    ),
    (
        "shape expression runs Python",
        lambda m: _json_edit(
            "models/model.json",
            lambda d: d["range_constraints"].update({f"__import__('os').system('touch {m}')": {}}),
        ),
        r"the shape expression .*__import__.* is not integer arithmetic on sizes",
    ),
]


@pytest.mark.parametrize("make,pattern", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_an_altered_program_is_refused_and_runs_nothing(make, pattern, exported, tmp_path):
    marker = tmp_path / "owned"
    path = _altered(exported, tmp_path, make(marker))
    with pytest.raises(VitposError) as caught:
        load_deployed(path)
    message = str(caught.value)
    assert re.search(pattern, message), message
    assert str(path) in message and "refused" in message and "export the model again" in message
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_sample_input_attack_is_real_for_an_unchecked_load(exported, tmp_path):
    """The case above guards a live hole: ``torch.export.load`` alone runs the pickle."""
    marker = tmp_path / "owned"
    path = _altered(
        exported, tmp_path, _replace("data/sample_inputs/model.pt", lambda d: pickle.dumps(_Marker(marker)))
    )
    with contextlib.suppress(Exception):  # it may fail after running the pickle; the marker is what counts
        torch.export.load(path)
    assert marker.exists()


def test_an_unaltered_program_loads_and_runs(exported):
    deployed = load_deployed(exported)
    assert deployed(torch.randn(2, 3, 16, 32)).shape == (2, 2)


def test_a_file_that_is_not_a_zip_is_a_clear_error(exported, tmp_path):
    path = tmp_path / "model.pt2"
    path.write_bytes(os.urandom(256))
    shutil.copy(metadata_path(exported), metadata_path(path))
    with pytest.raises(VitposError, match=r"model.pt2 is not a .pt2 archive \(not a zip file\)"):
        load_deployed(path)


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("note: hello\n", r"export metadata .*model\.pt2\.yaml lacks model, export; write it again"),
        ("model: [1]\nexport: {}\n", r"export metadata .*model\.pt2\.yaml: section 'model' must be a mapping"),
        ("a: &a [1, 1]\nmodel: {x: *a, y: *a, x: 1}\n", r"model\.pt2\.yaml: line 2: key 'x' is given twice"),
    ],
    ids=["no keys", "model a list", "duplicate key"],
)
def test_bad_export_metadata_is_a_clear_error(text, pattern, exported, tmp_path):
    path = tmp_path / "model.pt2"
    shutil.copy(exported, path)
    metadata_path(path).write_text(text)
    with pytest.raises(VitposError, match=pattern):
        load_deployed(path)


def test_convert_refuses_a_run_folder_and_changes_nothing(tmp_path, capsys):
    from vitpos.cli import main

    run = tmp_path / "run"
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    (run / "config.yaml").write_text("model: thesis_vit\n")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main(["convert", str(tmp_path / "released.pth"), str(run)]) == 2
    assert f"{run / 'config.yaml'} was not written by vitpos convert" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_failed_write_leaves_neither_a_part_nor_a_temporary_file(tmp_path):
    from vitpos.files import replacing

    target = tmp_path / "model.safetensors"
    target.write_bytes(b"old")
    with pytest.raises(OSError), replacing(target) as tmp:
        tmp.write_bytes(b"half")
        raise OSError("disk full")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


# ---- the weights cache and the size a safetensors header states --------------------------------


@pytest.mark.parametrize("value,expected", [("", False), ("0", False), ("false", False), ("1", True), ("TRUE", True)])
def test_offline_takes_zero_one_true_false(monkeypatch, value, expected):
    monkeypatch.setenv("VITPOS_OFFLINE", value)
    assert download.offline() is expected


@pytest.mark.parametrize("value", ["maybe", "yes", "2"])
def test_offline_refuses_anything_else(monkeypatch, value):
    monkeypatch.setenv("VITPOS_OFFLINE", value)
    with pytest.raises(VitposError, match=rf"VITPOS_OFFLINE='{value}' is not allowed"):
        download.offline()


def test_a_cached_file_is_checked_on_every_load(tmp_path, monkeypatch):
    data = b"published weights"
    name = f"w-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    monkeypatch.setenv("VITPOS_CACHE", str(tmp_path))
    monkeypatch.setenv("VITPOS_OFFLINE", "1")
    (tmp_path / name).write_bytes(data)
    assert download.download(f"https://example.org/{name}") == tmp_path / name
    (tmp_path / name).write_bytes(b"published weightz")  # damaged in the cache after it was verified
    with pytest.raises(
        CheckpointError,
        match=rf"cached file {re.escape(str(tmp_path / name))}: .*; delete {re.escape(str(tmp_path / name))} and",
    ):
        download.download(f"https://example.org/{name}")
    assert (tmp_path / name).read_bytes() == b"published weightz"  # reported, never deleted behind the user's back
    (tmp_path / name).write_bytes(data)
    with pytest.raises(CheckpointError, match=r"SHA-256 \w+ is not the published 0000"):  # the name's prefix is right
        download.download(f"https://example.org/{name}", sha256="00" * 32)


def test_the_header_states_the_tensor_bytes(tmp_path):
    file = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(3, 5), "b": torch.zeros(7, dtype=torch.float16)}, str(file))
    assert safetensors_bytes(file) == 3 * 5 * 4 + 7 * 2
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 2**62) + b"{}")
    with pytest.raises(CheckpointError, match=r"bad\.safetensors is truncated or corrupt \(its header claims"):
        safetensors_bytes(tmp_path / "bad.safetensors")
