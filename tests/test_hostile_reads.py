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
import torch
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
    return Case(call=lambda: val[torch.arange(2)])


def _rewritten_before_a_resume(tmp: Path) -> Case:
    folder, spec = _three(tmp)
    run = tmp / "run"
    assert main(["train", *TINY, f"--data={spec}", *RUN, "--epochs=1", f"--run-dir={run}"]) == 0
    forge.shards(folder, count=1, per_shard=5)
    argv = ["train", *TINY, f"--data={spec}", *RUN, "--epochs=2", f"--run-dir={run}", "--resume"]
    return Case(argv, guarded=[folder])


def _classes_changed_before_a_resume(tmp: Path) -> Case:
    """An image folder whose class ``b`` is renamed ``c`` between a run and its resume (labels keep their order)."""
    imgs = forge.image_folder(tmp / "imgs", per_class=4)
    run = tmp / "run"
    assert main(["train", *TINY, f"--data=folder:{imgs}", *RUN, "--epochs=1", f"--run-dir={run}"]) == 0
    for split in ("train", "val"):
        (imgs / split / "b").rename(imgs / split / "0")  # sorts first: every label moves
    argv = ["train", *TINY, f"--data=folder:{imgs}", *RUN, "--epochs=2", f"--run-dir={run}", "--resume"]
    return Case(argv, guarded=[imgs])


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


def _export_with(data: str) -> Callable[[Path], Case]:
    """An exported 2-output model whose YAML holds the data config ``data`` (YAML text); read by load_deployed."""

    def build(tmp: Path) -> Case:
        import yaml

        import vitpos
        from vitpos.deploy import load_deployed

        cfg = vitpos.create_model("thesis_vit", img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2).cfg
        model = yaml.safe_dump(
            {"model": cfg.to_dict(), "export": dict(format="pt2", min_size=8, max_size=32, stride=4)}
        )
        (tmp / "m.pt2").write_bytes(b"a program; never read, the YAML is refused first")
        (tmp / "m.yaml").write_text(model + "data:\n" + "".join(f"  {line}\n" for line in data.splitlines()))
        return Case(call=lambda: load_deployed(tmp / "m.pt2"), guarded=[tmp])

    return build


def _data_config(**change: str) -> str:
    """A data config for 16x16 RGB images and two classes, with the fields in ``change`` (YAML values)."""
    fields = dict(input_size="[3, 16, 16]", mean="[0.5, 0.5, 0.5]", std="[0.25, 0.25, 0.25]", crop_pct="1.0")
    fields |= dict(crop_mode="squash", interpolation="bilinear", label_names="[cat, dog]") | change
    return "".join(f"{k}: {v}\n" for k, v in fields.items())


def _predict_at(size: tuple[int, int]) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        from vitpos.weights.data_config import DataConfig

        config = DataConfig((3, 16, 16), (0.5,) * 3, (0.25,) * 3)
        return Case(call=lambda: config.preprocess(Image.new("RGB", (20, 20)), size))

    return build


def _classes_txt(make: Callable[[Path], object]) -> Callable[[Path], Case]:
    """Shards beside a ``classes.txt`` that ``make`` writes."""

    def build(tmp: Path) -> Case:
        folder, spec = _three(tmp)
        make(folder / "classes.txt")
        return Case(
            ["train", *TINY, f"--data={spec}", *RUN, "--epochs=1", f"--run-dir={tmp / 'run'}"], guarded=[folder]
        )

    return build


def _names(text: str) -> Callable[[Path], Case]:
    return _classes_txt(lambda path: path.write_text(text, encoding="utf-8"))


def _float_tiff(tmp: Path) -> Case:
    import numpy as np

    imgs = forge.image_folder(tmp / "imgs")
    Image.fromarray(np.full((32, 32), 0.5, dtype=np.float32)).save(imgs / "val" / "a" / "0.tif")
    (imgs / "val" / "a" / "0.png").unlink()
    argv = ["train", *TINY, f"--data=folder:{imgs}", *RUN, "--epochs=1", f"--run-dir={tmp / 'run'}"]
    return Case(argv, guarded=[imgs])


def _randaugment(x: torch.Tensor) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        from vitpos.data.randaugment import RandAugment  # kornia: imported only when asked for

        return Case(call=lambda: RandAugment()(x))

    return build


def _fifo(path: Path) -> None:
    import os

    os.mkfifo(path)


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
    (
        "class folders renamed before a resume",
        _classes_changed_before_a_resume,
        r"the classes of folder:.*imgs changed since checkpoint .*step-\d+ was written \(2 then, 2 now; class 0 was "
        r"'a', is '0'\).*another --run-dir",
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
    *[
        (f"export data config with {field} {value}", _export_with(_data_config(**{field: value})), pattern)
        for field, value, pattern in [
            ("std", "[.nan, 0.25, 0.25]", r"m\.yaml: the data config is invalid: std \[nan, 0\.25, 0\.25\] must"),
            ("std", "[.inf, 0.25, 0.25]", r"m\.yaml: .*std \[inf, .* must hold finite numbers above 0"),
            ("std", "[0, 0.25, 0.25]", r"m\.yaml: .*std \[0\.0, .* must hold finite numbers above 0"),
            ("std", "[-0.2, 0.25, 0.25]", r"m\.yaml: .*std \[-0\.2, .* must hold finite numbers above 0"),
            ("mean", "[.nan, 0.5, 0.5]", r"m\.yaml: .*mean \[nan, 0\.5, 0\.5\] holds a value that is not a finite"),
            ("mean", "'0.5'", r"m\.yaml: .*mean must be a list of numbers, not '0\.5'"),
            ("label_names", "[cat]", r"m\.yaml: the data config names 1 outputs in label_names, but the model has 2"),
            ("label_names", "[a, b, c, d, e]", r"m\.yaml: the data config names 5 outputs .* the model has 2"),
            ("label_names", "catdog", r"m\.yaml: .*label_names must be a list of names, not 'catdog'"),
            ("label_names", "!!set {cat: null, dog: null}", r"m\.yaml: .*label_names must be a list of names, not \{"),
            ("label_names", "[cat, 'Cat ']", r"m\.yaml: .*label_names: name 2 \('Cat '\) looks the same as name 1"),
            ("input_size", "[3, 0, 0]", r"m\.yaml: .*input_size \[3, 0, 0\] is out of range"),
            ("input_size", "[3, -16, 16]", r"m\.yaml: .*input_size \[3, -16, 16\] is out of range"),
            ("input_size", "[3, 200000, 200000]", r"m\.yaml: .*input_size \[3, 200000, 200000\] is out of range"),
            ("input_size", "'3x16x16'", r"m\.yaml: .*input_size must be \[channels, height, width\]"),
        ]
    ],
    ("predict at size 0", _predict_at((0, 0)), r"size \(0, 0\) must be \(height, width\)"),
    ("predict at size 200000", _predict_at((200000, 200000)), r"size \(200000, 200000\) must be"),
    *[
        (f"classes.txt naming {what}", _names(text), r"classes\.txt: line 2 \(.*\) looks the same as line 1")
        for what, text in [
            ("cat and 'cat '", "cat\ncat \n"),
            ("cat and Cat", "cat\nCat\n"),
            ("café in NFC and NFD", "caf\u00e9\ncafe\u0301\n"),
            ("cat and c\u200bat", "cat\nc\u200bat\n"),
            ("cat and cat\\0", "cat\ncat\0\n"),
        ]
    ],
    (
        "classes.txt a dangling link",
        _classes_txt(lambda p: p.symlink_to(p.parent / "gone.txt")),
        r"class list .*classes\.txt is a link to '.*gone\.txt', which does not exist",
    ),
    ("classes.txt a FIFO", _classes_txt(_fifo), r"class list .*classes\.txt is a named pipe \(FIFO\), not a regular"),
    (
        "classes.txt a link to /dev/zero",
        _classes_txt(lambda p: p.symlink_to("/dev/zero")),
        r"class list .*classes\.txt is a character device, not a regular file",
    ),
    (
        "RandAugment on RGBA images",
        _randaugment(torch.zeros(2, 4, 8, 8, dtype=torch.uint8)),
        r"RandAugment with a fill of 3 values takes 3-channel images, not 4 \(shape \(2, 4, 8, 8\)\); drop an alpha",
    ),
    (
        "RandAugment on one image (3-D)",
        _randaugment(torch.zeros(3, 8, 8, dtype=torch.uint8)),
        r"RandAugment takes a batch of images \(B, C, H, W\), not \(3, 8, 8\); one image \(C, H, W\) is x\[None\]",
    ),
    (
        "RandAugment on an int64 batch",
        _randaugment(torch.full((2, 3, 8, 8), 200, dtype=torch.int64)),
        r"RandAugment takes uint8 images \(grey levels 0\.\.255\) or floats in \[0, 1\], not torch\.int64",
    ),
    (
        "a float TIFF in an image folder",
        _float_tiff,
        r"image .*val/a/0\.tif holds floating-point pixels \(Pillow mode F\), whose range vitpos cannot know",
    ),
]


@pytest.mark.parametrize("build,pattern", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_data_read_in_full_or_refused(build, pattern, tmp_path, monkeypatch, capsys, record_property):
    run_row(build, pattern, tmp_path, monkeypatch, capsys, record_property)
