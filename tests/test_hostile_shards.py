"""Hostile data, fourth round: shards read for exact epochs, class lists as users write them, the shard writer's
output folders, signals during `vitpos shard`, schedules and weights files under an address limit.

Each row is a bad input and the answer it must get (:mod:`tests.hostile_harness` runs and judges
it: exit status, the message naming the file, field or line, nothing written or lost, an end
within seconds). ``python tests/hostile_census.py`` counts them with the other hostile rows.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import vitpos

from .data import hostile_files as forge
from .hostile_harness import Case, run_row

TINY = ["--model=thesis_vit", "--img-size=16", "--patch-size=4", "--embed-dim=32", "--depth=1", "--num-heads=2"]
RUN = ["--epochs=1", "--batch-size=4", "--warmup-epochs=0", "--no-progress"]
GiB = 2**30


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


def _wds(tmp: Path, pattern: str, *flags: str, folder: Path | None = None) -> Case:
    folder = folder or tmp / "wds"
    argv = ["train", *TINY, f"--data=wds:{pattern.format(f=folder)}", *RUN, *flags, f"--run-dir={tmp / 'run'}"]
    return Case(argv, guarded=[folder])


def _twenty(tmp: Path, bad: bool = False) -> Path:
    """``wds/s-{0,1}.tar`` of 10 samples each (``bad``: one of them not an image) and ``wds/v.tar``."""
    folder = forge.shards(tmp / "wds", count=2, per_shard=10)
    if bad:
        samples = [(f"1{i:03d}", forge.png(shade=20 * i), b"%d" % (i % 2)) for i in range(10)]
        samples[7] = ("1007", b"not an image at all", b"1")
        forge.write_tar(folder / "s-1.tar", samples)
    forge.write_tar(folder / "v.tar", [("v0", forge.png(), b"0"), ("v1", forge.png(), b"1")])
    return folder


def _bad_image_in_an_epoch(tmp: Path) -> Case:
    _twenty(tmp, bad=True)
    # seed 1: the seed at which an epoch drawn with replacement (before exact epochs) missed the bad image
    return _wds(tmp, "{f}/s-{{0..1}}.tar:val={f}/v.tar", "--workers=2", "--seed=1")


def _more_workers_than_shards(tmp: Path) -> Case:
    _twenty(tmp)
    case = _wds(tmp, "{f}/s-{{0..1}}.tar:val={f}/v.tar", "--workers=3")
    case.answer = 0
    return case


def _class_list(text: bytes, answer: int | None = None) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = forge.shards(tmp / "wds", count=2)
        (folder / "classes.txt").write_bytes(text)
        case = _wds(tmp, "{f}/s-{{0..1}}.tar")
        case.answer = answer
        return case

    return build


def _renamed_class(new: bytes) -> Callable[[Path], Case]:
    """``vitpos shard`` of a folder whose class ``b`` is renamed to the bytes ``new``."""

    def build(tmp: Path) -> Case:
        imgs = forge.image_folder(tmp / "imgs")
        for split in ("train", "val"):
            os.rename(bytes(imgs / split / "b"), os.fsencode(imgs / split) + b"/" + new)
        return Case(["shard", f"folder:{imgs}", str(tmp / "out"), "--no-progress"], guarded=[tmp])

    return build


def _one_class(tmp: Path) -> Case:
    imgs = forge.image_folder(tmp / "imgs", per_class=4)  # a class holds a batch
    for split in ("train", "val"):
        for image in (imgs / split / "b").iterdir():
            image.unlink()
        (imgs / split / "b").rmdir()
    argv = ["train", *TINY, f"--data=folder:{imgs}", *RUN, f"--run-dir={tmp / 'run'}"]
    return Case(argv, guarded=[imgs])


def _shard_members(members: Callable[[], list[tuple[str, bytes | str]]]) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = forge.shards(tmp / "wds", count=3)  # s-2 holds the validation split
        forge.write_members(folder / "s-0.tar", members())
        return _wds(tmp, "{f}/s-{{0..2}}.tar")

    return build


def _overlap(tmp: Path) -> Case:
    data = "--data=synthetic:direction:img=16:train=8:val=4:test=4"
    schedule = ["--epochs=2", "--warmup-epochs=1.5", "--cooldown-epochs=1"]
    argv = ["train", *TINY, data, "--batch-size=4", "--no-progress", *schedule, f"--run-dir={tmp / 'run'}"]
    return Case(argv, warns=True)


@contextlib.contextmanager
def _address_limit(room: int) -> Iterator[None]:
    """An address-space limit ``room`` bytes above what this process maps now (``ulimit -v``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (used + room, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _limited_checkpoint(declared: int) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = tmp / "ckpt"
        folder.mkdir()
        forge.sparse_safetensors(folder / "model.safetensors", declared)
        argv = ["eval", f"--checkpoint={folder}", "--data=synthetic:direction:img=16"]
        return Case(argv, guarded=[folder], within=lambda: _address_limit(8 * GiB))

    return build


def _head_of_the_right_count(tmp: Path) -> Case:
    """A file whose classifier has the model's class count but is 64 wide, loaded into a model 32 wide: no
    num_classes hint."""
    tiny = dict(img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2)
    state = vitpos.create_model("thesis_vit", **tiny).state_dict()
    state["head.weight"] = torch.zeros(len(state["head.bias"]), 64)
    file = tmp / "w.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(file))
    return Case(call=lambda: vitpos.create_model("thesis_vit", checkpoint=file, **tiny), guarded=[file])


def _user_files_named_like_shards(tmp: Path) -> Case:
    out = tmp / "out"
    out.mkdir()
    (out / "train-000000.tar").write_text("my notes, not a shard\n")
    (out / "classes.txt").write_text("a\nb\n")
    src = forge.image_folder(tmp / "imgs")
    return Case(["shard", f"folder:{src}", str(out), "--overwrite", "--no-progress"], guarded=[tmp])


def _no_leftover(tmp: Path) -> bool:
    return not any(".writing-" in p.name or ".replaced-" in p.name for p in tmp.iterdir())


def _terminated(tmp: Path) -> Case:
    """`vitpos shard` in a child process that receives SIGTERM after its first shard."""
    src = forge.image_folder(tmp / "imgs", per_class=4)
    out = tmp / "out"
    script = textwrap.dedent(f"""
        import os, signal
        import vitpos.commands.shard as shard
        from vitpos.cli import main
        write = shard.write_shards
        def write_then_stop(*args, **kwargs):
            written = write(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGTERM)
            return written
        shard.write_shards = write_then_stop
        raise SystemExit(main(["shard", "folder:{src}", "{out}", "--per-shard=2", "--no-progress"]))
    """)

    def judge() -> tuple[str, str]:
        child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50)
        said = f"status {child.returncode}; {child.stderr[-2000:]}"
        if "Traceback" in child.stderr:
            return "traceback", said
        if not _no_leftover(tmp) or out.exists():
            return "lost", said + f"; left: {sorted(p.name for p in tmp.iterdir())}"
        return ("clear" if child.returncode == 128 + 15 else "silent"), said

    return Case(judge=judge, guarded=[src])


def _killed_before(tmp: Path) -> Case:
    """A temporary folder left by a `vitpos shard` killed with SIGKILL (its process gone), then a new run."""
    src = forge.image_folder(tmp / "imgs")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp / f".out.writing-{gone.pid}"
    left.mkdir()
    (left / "train-000000.tar").write_bytes(b"half a shard")
    case = Case(["shard", f"folder:{src}", str(tmp / "out"), "--no-progress"], guarded=[src], answer=0)
    case.after = lambda: not left.exists()
    return case


def _flat_folder(tmp: Path) -> Case:
    imgs = tmp / "flat"
    for c, name in enumerate("ab"):
        (imgs / name).mkdir(parents=True)
        for i in range(10):
            (imgs / name / f"{i}.png").write_bytes(forge.png(16, 16, 100 * c + i))
    return Case(["shard", f"folder:{imgs}", str(tmp / "out"), "--no-progress"], guarded=[imgs], answer=0)


def _odd_shard(make: Callable[[Path], object], pattern: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = forge.shards(tmp / "wds", count=1)
        make(folder / "s-1.tar")
        return _wds(tmp, pattern)

    return build


ROWS: list[tuple[str, Callable[[Path], Case], str]] = [
    (
        "a bad image in 20 samples over 2 shards, 2 workers",
        _bad_image_in_an_epoch,
        r"s-1\.tar:1007\.png",
    ),
    ("2 training shards, 3 workers", _more_workers_than_shards, r"epoch 1/1 .*train_loss"),
    ("classes.txt without a final newline", _class_list(b"cat\ndog", answer=0), r"classification, 2 classes"),
    ("classes.txt naming a class twice", _class_list(b"cat\ncat\n"), r"classes\.txt: line 2 repeats 'cat' \(line 1\)"),
    ("classes.txt empty", _class_list(b""), r"class list .*classes\.txt is empty"),
    ("classes.txt with a blank line", _class_list(b"cat\n\ndog\n"), r"classes\.txt: line 2 is blank"),
    (
        "classes.txt in Latin-1",
        _class_list("café\ndog\n".encode("latin-1")),
        r"class list .*classes\.txt is not UTF-8: byte 3 \(line 1\) is 0xE9",
    ),
    (
        "a class folder named d\\nog, shard",
        _renamed_class(b"d\nog"),
        r"class folder .*train/'d\\nog' has the line break '\\n' in its name",
    ),
    (
        "a class folder named in Latin-1, shard",
        _renamed_class("café".encode("latin-1")),
        r"class folder .*train/caf\\xe9 has a name that is not UTF-8 \(byte 3 of the name is 0xE9\)",
    ),
    ("one class only, folder", _one_class, r"image folder .*imgs/train has 1 class \('a'\): a classifier needs"),
    (
        "a key twice in one shard",
        _shard_members(
            lambda: [
                ("k.png", forge.png()),
                ("k.cls", b"0"),
                ("k.jpg", forge.png()),
                ("j.png", forge.png()),
                ("j.cls", b"1"),
            ]
        ),
        r"s-0\.tar: member k\.jpg is a second image of sample k \(the first is k\.png\)",
    ),
    (
        "a symbolic link member",
        _shard_members(
            lambda: [("k.png", forge.png()), ("k.cls", "->/etc/passwd"), ("j.png", forge.png()), ("j.cls", b"1")]
        ),
        r"s-0\.tar: member k\.cls is a symbolic link to '/etc/passwd'",
    ),
    (
        "warm-up into the cool-down",
        _overlap,
        r"warning: warmup_epochs 1\.5 runs into the cool-down \(the last 1 of 2 epochs, from step 3\): the learning "
        r"rate rises linearly over the first 3 steps to its peak 0\.001, stays there one step, then the run ends",
    ),
    (
        "6 GiB safetensors under an 8 GiB address limit",
        _limited_checkpoint(6 * GiB),
        r"loading .*model\.safetensors would need at least 12 GiB of address space .*ulimit -v",
    ),
    (
        "12 GiB safetensors under an 8 GiB address limit",
        _limited_checkpoint(12 * GiB),
        r"loading .*model\.safetensors would need at least 24 GiB of address space",
    ),
    (
        "a classifier of the same class count, other width",
        _head_of_the_right_count,
        r"^(?!.*num_classes)checkpoint .*w\.safetensors.*head\.weight \(checkpoint \((\d+), 64\), model \(\1, 32\)\)",
    ),
    (
        "shard into /proc",
        lambda t: Case(["shard", f"folder:{forge.image_folder(t / 'imgs')}", f"/proc/vitpos-{t.name}"], guarded=[t]),
        r"output /proc/vitpos-\S+ cannot be written",
    ),
    (
        "a FIFO as a shard",
        _odd_shard(os.mkfifo, "{f}/s-{{0..1}}.tar"),
        r"shard .*s-1\.tar is a named pipe \(FIFO\), not a regular file",
    ),
    ("a folder as a shard", _odd_shard(Path.mkdir, "{f}/s-{{0..1}}.tar"), r"shard .*s-1\.tar is a folder, not a"),
    ("/dev/zero as a shard", _odd_shard(lambda p: None, "/dev/zero:val={f}/s-0.tar"), r"/dev/zero is a character dev"),
    (
        "shard --overwrite over the user's files named like shards",
        _user_files_named_like_shards,
        r"out holds classes\.txt, train-000000\.tar, which vitpos shard did not write \(no record of it in its "
        r"\.vitpos-manifest\.jsonl",
    ),
    ("SIGTERM during shard", _terminated, r""),
    (
        "shard after a run killed with SIGKILL",
        _killed_before,
        r"removed .*\.out\.writing-\d+, the temporary folder of an earlier vitpos shard into .*out that was killed",
    ),
    (
        "shard of a flat folder",
        _flat_folder,
        r"flat has no train/ or val/ folder, so the splits are made here: class folders split at random \(seed 0\): "
        r"10% val, 10% test \(2 images each\)",
    ),
]


@pytest.mark.parametrize("build,pattern", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_data_is_read_as_written(build, pattern, tmp_path, monkeypatch, capsys, record_property):
    run_row(build, pattern, tmp_path, monkeypatch, capsys, record_property)
