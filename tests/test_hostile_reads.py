"""Hostile data, fifth round: shards rewritten under a run, small silent drops in shards, class lists and images,
data configs as deployments read them.

Each row is a bad input and the answer it must get (:mod:`tests.hostile_harness` runs and judges
it: exit status, the message naming the file, field or line, nothing written or lost, an end
within seconds). ``python tests/hostile_census.py`` counts them with the other hostile rows.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from vitpos.cli import main
from vitpos.data import open_data
from vitpos.data.crops import TrainCrop

from .data import hostile_files as forge
from .hostile_harness import Case, run_row

TINY = ["--model=thesis_vit", "--img-size=16", "--patch-size=4", "--embed-dim=32", "--depth=1", "--num-heads=2"]
RUN = ["--batch-size=4", "--warmup-epochs=0", "--no-progress"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


def _three(tmp: Path) -> tuple[Path, str]:
    """``wds/s-{0,1,2}.tar`` of 4 samples each, and the spec that trains on the first two."""
    folder = forge.shards(tmp / "wds", count=3)
    return folder, f"wds:{folder}/s-{{0..1}}.tar:val={folder}/s-2.tar"


def _rewritten_under_a_stream(tmp: Path) -> Case:
    """Shards opened, then written again (other labels, the same sizes) before an epoch reads them."""
    from vitpos.data.shard_stream import ShardStream  # here: the census may run an older vitpos

    folder, spec = _three(tmp)
    train = open_data(spec).train
    forge.shards(folder, count=1, label=b"1")
    stream = ShardStream(train, TrainCrop((8, 8)), seed=0, epoch=0, rank=0, world=1, local_batch=4, steps=2)
    return Case(call=lambda: list(stream))


def _rewritten_under_evaluation(tmp: Path) -> Case:
    folder, spec = _three(tmp)
    val = open_data(spec).val.at_size(8)
    forge.shards(folder, count=3, per_shard=5)
    return Case(call=lambda: val[__import__("torch").arange(2)])


def _rewritten_before_a_resume(tmp: Path) -> Case:
    folder, spec = _three(tmp)
    run = tmp / "run"
    assert main(["train", *TINY, f"--data={spec}", *RUN, "--epochs=1", f"--run-dir={run}"]) == 0
    forge.shards(folder, count=1, per_shard=5)
    argv = ["train", *TINY, f"--data={spec}", *RUN, "--epochs=2", f"--run-dir={run}", "--resume"]
    return Case(argv, guarded=[folder])


def _tar_bytes(samples: list[tuple[str, bytes, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for key, image, label in samples:
            for name, data in ((f"{key}.png", image), (f"{key}.cls", label)):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _concatenated(tmp: Path) -> Case:
    folder, spec = _three(tmp)
    with open(folder / "s-0.tar", "ab") as f:  # `cat a.tar b.tar > s-0.tar`
        f.write(_tar_bytes([("x000", forge.png(), b"1")]))
    return Case(call=lambda: open_data(spec), guarded=[folder])


def _members(members: list[tuple[str, bytes | str]]) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder, spec = _three(tmp)
        forge.write_members(folder / "s-0.tar", members)
        return Case(call=lambda: open_data(spec), guarded=[folder])

    return build


def _avif() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 30, 40)).save(out, format="AVIF")
    return out.getvalue()


def _avif_samples(tmp: Path) -> Case:
    """A shard of AVIF images: trained on, every sample counted."""
    folder, spec = _three(tmp)
    forge.write_members(
        folder / "s-0.tar",
        [(f"a{i}.avif", _avif()) for i in range(4)] + [(f"a{i}.cls", b"%d" % (i % 2)) for i in range(4)],
    )
    argv = ["train", *TINY, f"--data={spec}", *RUN, "--epochs=1", f"--run-dir={tmp / 'run'}"]
    return Case(argv, guarded=[folder], answer=0)


def _empty_split(which: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = forge.shards(tmp / "wds", count=3)
        return Case(call=lambda: open_data(f"wds:{folder}/s-{{0..2}}.tar:{which}="), guarded=[folder])

    return build


ROWS: list[tuple[str, Callable[[Path], Case], str]] = [
    ("shards rewritten while a run streams them", _rewritten_under_a_stream, r"shard .*s-0\.tar changed after it was"),
    (
        "shards rewritten while a run evaluates them",
        _rewritten_under_evaluation,
        r"shard .*s-2\.tar changed after it was opened \(\d+ bytes then, \d+ now\).*another --run-dir",
    ),
    (
        "shards rewritten before a resume",
        _rewritten_before_a_resume,
        r"shard .*s-0\.tar was rewritten \(.*\) since checkpoint .*step-\d+ was written.*another --run-dir",
    ),
    ("a second tar appended to a shard", _concatenated, r"shard .*s-0\.tar holds more after the end of its tar"),
    (
        "a .cls member of 70 bytes",
        _members([("k.png", forge.png()), ("k.cls", b"0" * 69 + b"1"), ("j.png", forge.png()), ("j.cls", b"1")]),
        r"shard .*s-0\.tar: k\.cls is 70 bytes long, not a class number",
    ),
    (
        "labels without an image",
        _members([("k.png", forge.png()), ("k.cls", b"0"), ("j.heic", b"..."), ("j.cls", b"1"), ("i.cls", b"1")]),
        r"shard .*s-0\.tar: 2 label\(s\) have no image, e.g\. i\.cls; vitpos reads images ending in",
    ),
    ("AVIF samples", _avif_samples, r"train 8 / val 4 images"),
    ("an empty :val=", _empty_split("val"), r"data spec .*: val= names no shards"),
    ("an empty :test=", _empty_split("test"), r"data spec .*: test= names no shards"),
]


@pytest.mark.parametrize("build,pattern", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_data_read_in_full_or_refused(build, pattern, tmp_path, monkeypatch, capsys, record_property):
    run_row(build, pattern, tmp_path, monkeypatch, capsys, record_property)
