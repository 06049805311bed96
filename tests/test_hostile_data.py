"""Hostile data, as a user would hand it over: shards, image folders, COCO files, the weights cache.

Each row is a bad input and the answer it must get (:mod:`tests.hostile_harness` runs and judges
it). ``python tests/hostile_census.py`` counts the outcomes with those of
``tests/test_bad_inputs.py`` and ``tests/test_hostile_shards.py``.
"""

from __future__ import annotations

import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

import vitpos
import vitpos.data
import vitpos.engine
from vitpos.cli import main

from .data import hostile_files as forge
from .hostile_harness import Case, run_row

TINY = ["--model=thesis_vit", "--img-size=16", "--patch-size=4", "--embed-dim=32", "--depth=1", "--num-heads=2"]
MANIFEST = ".vitpos-manifest.jsonl"
"""The record of the files vitpos wrote in a folder (:mod:`vitpos.ownership`)."""
RUN = ["--epochs=1", "--batch-size=2", "--warmup-epochs=0", "--no-progress"]
TiB = 2**40


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


def _shard_source(tmp: Path) -> Path:
    return forge.image_folder(tmp / "imgs")


def _cluttered_out(tmp: Path) -> Path:
    out = tmp / "out"
    forge.shards(out, count=1)
    (out / "s-0.tar").rename(out / "train-000008.tar")
    shutil.copy(out / "train-000008.tar", out / "val-000001.tar")
    (out / "classes.txt").write_text("old\n")
    (out / "notes.txt").write_text("my notes\n")
    return out


def _old_shards(tmp: Path) -> Path:
    out = tmp / "out"
    assert main(["shard", f"folder:{forge.image_folder(tmp / 'old')}", str(out), "--no-progress"]) == 0
    return out


def _user_shards(tmp: Path) -> Path:
    """A user's own WebDataset shards named and keyed as vitpos's (9-digit keys, an image then its .cls)."""
    out = _old_shards(tmp)
    (out / MANIFEST).unlink()
    return out


def _shards_behind_a_link(tmp: Path) -> Path:
    """OUT is a link to a folder of shards vitpos wrote."""
    _old_shards(tmp).rename(tmp / "real")
    (tmp / "out").symlink_to(tmp / "real")
    return tmp / "out"


def _run_folder(tmp: Path) -> Path:
    run = tmp / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("train: {epochs: 1}\n")
    (run / "metrics.jsonl").write_text('{"epoch": 1}\n')
    return run


def _shard_over_a_link(tmp: Path) -> Case:
    """--overwrite into OUT, a link: the shards replace the folder it names, the link stays, nothing is left beside."""
    out, src = _shards_behind_a_link(tmp), _shard_source(tmp)

    def after() -> bool:
        left = [p.name for p in tmp.iterdir() if ".replaced-" in p.name or ".writing-" in p.name]
        return out.is_symlink() and out.resolve() == tmp / "real" and not left and (out / "val-000000.tar").is_file()

    argv = ["shard", f"folder:{src}", str(out), "--overwrite", "--seed=3", "--no-progress"]
    return Case(argv, guarded=[src], answer=0, after=after)


def _shard_into(out: Callable[[Path], Path], *flags: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        src, dst = _shard_source(tmp), out(tmp)
        return Case(["shard", f"folder:{src}", str(dst), *flags], guarded=[src, dst])

    return build


def _per_shard(n: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        return Case(["shard", f"folder:{_shard_source(tmp)}", str(tmp / "out"), f"--per-shard={n}"], guarded=[tmp])

    return build


def _bomb_folder(workers: int) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        imgs = forge.image_folder(tmp / "imgs")
        (imgs / "train" / "a" / "zz.png").write_bytes(forge.bomb_png())
        argv = ["train", *TINY, f"--data=folder:{imgs}", *RUN, f"--workers={workers}", f"--run-dir={tmp / 'run'}"]
        return Case(argv, guarded=[imgs])

    return build


def _bomb_shards(tmp: Path) -> Case:
    folder = forge.shards(tmp / "wds")
    forge.write_tar(folder / "s-0.tar", [("bomb", forge.bomb_png(), b"0"), ("ok", forge.png(), b"1")])
    data = f"--data=wds:{folder}/s-{{0..1}}.tar"
    return Case(["train", *TINY, data, *RUN, "--workers=1", f"--run-dir={tmp / 'run'}"], guarded=[folder])


def _bomb_coco(tmp: Path) -> Case:
    root = forge.coco_folder(tmp / "coco", [{"id": 1, "file_name": "0.png"}, {"id": 2, "file_name": "1.png"}])
    (root / "images" / "0.png").write_bytes(forge.bomb_png())
    (root / "images" / "1.png").write_bytes(forge.bomb_png())
    return Case(_detr_train(root, tmp), guarded=[root])


def _detr_train(root: Path, tmp: Path) -> list[str]:
    return ["train", "--model=detr_tiny_sine", "--img-size=32", f"--data=coco:{root}", "--epochs=1",
            "--batch-size=1", "--warmup-epochs=0", "--no-progress", f"--run-dir={tmp / 'run'}"]  # fmt: skip


def _wds_train(pattern: Callable[[Path], str], prepare: Callable[[Path], None] = lambda folder: None):
    def build(tmp: Path) -> Case:
        folder = tmp / "wds"
        folder.mkdir()
        prepare(folder)
        return Case(
            ["train", *TINY, f"--data=wds:{pattern(folder)}", *RUN, f"--run-dir={tmp / 'run'}"], guarded=[folder]
        )

    return build


def _huge_label(folder: Path) -> None:
    forge.shards(folder, count=2)
    forge.write_tar(folder / "s-1.tar", [("big", forge.png(), b"999999999999"), ("ok", forge.png(), b"0")])


def _cut(folder: Path) -> None:
    forge.shards(folder, count=2, per_shard=8)
    forge.cut_after(folder / "s-0.tar", 3)


def _cache(content: bytes | None, **env: str) -> Callable[[Path], Case]:
    """``pretrained=True`` with a cache holding DeiT-Ti's file name over ``content`` (None: the cache is a file)."""

    def build(tmp: Path) -> Case:
        cache = tmp / "cache"
        if content is None:
            cache.write_text("not a folder")
        else:
            cache.mkdir()
            (cache / "deit_tiny_patch16_224-a1311bcf.pth").write_bytes(content)
        call = lambda: vitpos.create_model("deit_tiny_patch16_224", pretrained=True)  # noqa: E731
        return Case(call=call, env={"VITPOS_CACHE": str(cache), **env}, guarded=[cache])

    return build


def _sparse_checkpoint(kind: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = tmp / "ckpt"
        folder.mkdir()
        file = forge.sparse_safetensors(folder / "model.safetensors", 4 * TiB)
        if kind == "eval":
            return Case(["eval", f"--checkpoint={folder}", "--data=synthetic:direction:img=16"], guarded=[folder])
        if kind == "init":
            argv = ["train", *TINY, "--data=synthetic:direction:img=16:train=8:val=4:test=4", *RUN, f"--init={file}"]
            return Case([*argv, f"--run-dir={tmp / 'run'}"], guarded=[folder])
        return Case(call=lambda: vitpos.load_model(folder), guarded=[folder])

    return build


def _coco_open(images: list[dict], categories: list[dict] | None = None) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        root = forge.coco_folder(tmp / "coco", images, categories)
        (tmp / "other").mkdir()
        (tmp / "other" / "0.png").write_bytes(forge.png())
        return Case(_detr_train(root, tmp), guarded=[root, tmp / "other"])

    return build


def _coco_wrong_size(tmp: Path) -> Case:
    wrong = {"width": 64, "height": 48}
    root = forge.coco_folder(tmp / "coco", [{"id": i, "file_name": f"{i}.png"} | wrong for i in range(2)])
    return Case(_detr_train(root, tmp), guarded=[root])


def _long_warmup(tmp: Path) -> Case:
    config = tmp / "long.yaml"
    config.write_text(yaml.safe_dump({"train": {"warmup_epochs": 400}}))
    data = "--data=synthetic:direction:img=16:train=8:val=4:test=4"
    argv = ["train", *TINY, data, "--epochs=1", "--batch-size=4", "--no-progress", f"--config={config}"]
    return Case([*argv, f"--run-dir={tmp / 'run'}"], guarded=[config], warns=True)


def _offline(value: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        call = lambda: vitpos.create_model("deit_tiny_patch16_224", pretrained=True)  # noqa: E731
        return Case(call=call, env={"VITPOS_CACHE": str(tmp / "cache"), "VITPOS_OFFLINE": value}, guarded=[tmp])

    return build


def _pixel_limit(tmp: Path) -> Case:
    imgs = forge.image_folder(tmp / "imgs")
    argv = ["train", *TINY, f"--data=folder:{imgs}", *RUN, f"--run-dir={tmp / 'run'}"]
    return Case(argv, env={"VITPOS_MAX_IMAGE_PIXELS": "lots"}, guarded=[imgs])


BOMB = r"image .*{}.* is 400000000 pixels, more than the limit of \d+ pixels .*raise the limit with VITPOS_MAX_IMAGE"

ROWS: list[tuple[str, Callable[[Path], Case], str]] = [
    (
        "shard into a folder of other files",
        _shard_into(_cluttered_out),
        r"out holds classes\.txt, notes\.txt, train-000008\.tar and 1 more, which vitpos shard did not write",
    ),
    (
        "shard --overwrite over other files",
        _shard_into(_cluttered_out, "--overwrite"),
        r"out holds classes\.txt, notes\.txt, train-000008\.tar and 1 more, which vitpos shard did not write",
    ),
    (
        "shard --overwrite over a user's shards named as its own",
        _shard_into(_user_shards, "--overwrite"),
        r"out holds classes\.txt, train-000000\.tar, val-000000\.tar, which vitpos shard did not write \(no "
        r"record of it in its \.vitpos-manifest\.jsonl, or changed since\); --overwrite replaces only its own",
    ),
    ("shard over old shards", _shard_into(_old_shards), r"out already holds shards .*pass --overwrite"),
    ("shard --overwrite into a link", _shard_over_a_link, r"wrote \S*/real \(2 classes in classes\.txt\)"),
    ("shard into a run folder", _shard_into(_run_folder, "--overwrite"), r"run is a training run folder"),
    ("shard --per-shard 0", _per_shard("0"), r"argument --per-shard: must be a positive integer, got '0'"),
    ("shard --per-shard -1", _per_shard("-1"), r"argument --per-shard: must be a positive integer, got '-1'"),
    ("bomb PNG, folder", _bomb_folder(0), BOMB.format(r"imgs/train/a/zz\.png")),
    ("bomb PNG, folder, a worker", _bomb_folder(1), BOMB.format(r"imgs/train/a/zz\.png")),
    ("bomb PNG, shards, a worker", _bomb_shards, BOMB.format(r"s-0\.tar:bomb\.png")),
    ("bomb PNG, COCO", _bomb_coco, BOMB.format(r"images/[01]\.png")),
    (
        "shard label 999999999999",
        _wds_train(lambda f: f"{f}/s-{{0..1}}.tar", _huge_label),
        r"s-1\.tar: big\.png has "
        r"label 999999999999, more than the 100000 classes .*write .*classes\.txt",
    ),
    (
        "brace range of 10**9 shards",
        _wds_train(lambda f: f"{f}/s-{{000000..999999999}}.tar"),
        r"s-\{000000\.\."
        r"999999999\}\.tar' names 1000000000 shards, more than the 100000",
    ),
    (
        "shard cut on a member boundary",
        _wds_train(lambda f: f"{f}/s-{{0..1}}.tar", _cut),
        r"shard .*s-0\.tar is "
        r"truncated: it stops after byte 6144 without the two zero blocks",
    ),
    (
        "cached file of wrong content",
        _cache(b"not the weights"),
        r"cached file .*deit_tiny_patch16_224-a1311bcf\.pth: "
        r"the file's SHA-256 \w+ does not start with a1311bcf, .*delete .*a1311bcf\.pth",
    ),
    ("cached file of wrong content, offline", _cache(b"x", VITPOS_OFFLINE="1"), r"a1311bcf\.pth: .*; delete "),
    ("VITPOS_CACHE a regular file", _cache(None), r"VITPOS_CACHE .*cache is a file, not a folder"),
    (
        "4 TiB sparse safetensors, eval",
        _sparse_checkpoint("eval"),
        r"loading .*model\.safetensors would need at "
        r"least 4 TiB, more than the .* of memory",
    ),
    (
        "4 TiB sparse safetensors, train --init",
        _sparse_checkpoint("init"),
        r"loading .*model\.safetensors would "
        r"need at least 4 TiB",
    ),
    ("4 TiB sparse safetensors, load_model", _sparse_checkpoint("api"), r"model\.safetensors would need at least"),
    (
        "COCO two images with one id",
        _coco_open([{"id": 1, "file_name": "0.png"}, {"id": 1, "file_name": "1.png"}]),
        r"instances_train\.json: 2 images have id 1 .*give each image an id of its own",
    ),
    (
        "COCO two categories with one id",
        _coco_open([{"id": 1, "file_name": "0.png"}], [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]),
        r"instances_train\.json: 2 categories have id 1",
    ),
    (
        "COCO file name leaving the root",
        _coco_open([{"id": 1, "file_name": "../../other/0.png"}]),
        r"instances_train\.json: image 1 has file_name '\.\./\.\./other/0\.png', which leaves the image folder",
    ),
    (
        "COCO size unlike the file",
        _coco_wrong_size,
        r"instances_train\.json: image [01]\.png is 32x32 pixels, but its "
        r"entry gives width 64, height 48",
    ),
    (
        "warm-up longer than the run",
        _long_warmup,
        r"warning: warmup_epochs 400 is at least the run's 1 epoch\(s\): "
        r"the learning rate rises linearly for the whole run, reaching [\d.e-]+ at the last step "
        r"\(0.25% of its peak 0.001\), and never decays",
    ),
    (
        "--recipe twice",
        lambda t: Case(["train", "--recipe=deit", "--recipe=swin"]),
        r"argument --recipe: given twice \(deit, then swin\); give it once",
    ),
    ("VITPOS_OFFLINE=maybe", _offline("maybe"), r"VITPOS_OFFLINE='maybe' is not allowed: set it to 1 or true"),
    ("VITPOS_MAX_IMAGE_PIXELS=lots", _pixel_limit, r"VITPOS_MAX_IMAGE_PIXELS='lots' is not allowed"),
]


@pytest.mark.parametrize("build,pattern", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_data_is_refused_clearly_and_touches_nothing(
    build, pattern, tmp_path, monkeypatch, capsys, record_property
):
    run_row(build, pattern, tmp_path, monkeypatch, capsys, record_property)


# ---- rows answered by a behaviour rather than an error -------------------------------------------


def test_hostile_data_flat_folder_is_sharded_with_its_test_split(tmp_path, capsys, record_property):
    imgs = tmp_path / "flat"
    for c, name in enumerate("ab"):
        (imgs / name).mkdir(parents=True)
        for i in range(10):
            (imgs / name / f"{i}.png").write_bytes(forge.png(16, 16, 100 * c + i))
    status = main(["shard", f"folder:{imgs}", str(tmp_path / "out")])
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    said = re.search(r"test: 2 images in 1 shard\(s\)", out) and ":test=" in out
    ok = status == 0 and written == [MANIFEST, "classes.txt", "test-000000.tar", "train-000000.tar", "val-000000.tar"]
    record_property("outcome", "clear" if ok and said else "silent")
    assert ok and said, out
    spec = re.search(r"--data '(wds:[^']+)'", out)
    assert spec is not None
    data = vitpos.data.open_data(spec.group(1))
    assert [len(data.split(s)) for s in ("train", "val", "test")] == [16, 2, 2]


def test_hostile_data_resume_with_other_workers_keeps_the_saved_buffer(tmp_path, caplog, record_property):
    """A shard run stopped mid-epoch with two loading workers, resumed with one and another shuffle buffer: the
    saved buffer is kept, and the resumed run equals the uninterrupted one whatever the workers."""
    folder = forge.shards(tmp_path / "wds", count=5, per_shard=4)
    data = f"wds:{folder}/s-{{0..3}}.tar:val={folder}/s-4.tar"
    model = dict(img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2, head="gap")
    options = dict(data=data, epochs=2, batch_size=4, warmup_epochs=0, progress=False, shuffle_buffer=6)
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = vitpos.engine.train(
        *vitpos.engine.RunRequest(
            "thesis_vit", model, options | dict(workers=2, save_every=2, keep_checkpoints=100, run_dir=str(full_dir))
        ).resolve()
    )
    (cut_dir / "checkpoints").mkdir(parents=True)
    shutil.copytree(full_dir / "checkpoints" / "step-00000006", cut_dir / "checkpoints" / "step-00000006")
    with caplog.at_level("INFO", logger="vitpos.train"):
        resumed = vitpos.engine.train(
            *vitpos.engine.RunRequest(
                "thesis_vit", model, options | dict(workers=1, shuffle_buffer=3, save_every=2, run_dir=str(cut_dir))
            ).resolve(),
            resume=True,
        )
    said = any(
        re.search(
            r"resuming with the run's saved shuffle-buffer 6 instead of shuffle-buffer 3",
            r.getMessage(),
        )
        for r in caplog.records
    )
    same = all(torch.equal(p, q) for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True))
    record_property("outcome", "clear" if said and same else "silent")
    assert said and same
    assert yaml.safe_load((cut_dir / "config.yaml").read_text())["train"]["shuffle_buffer"] == 6


def test_a_warm_up_shorter_than_the_run_says_nothing():
    from vitpos.engine.optim import WarmupCosine, warn_long_warmup  # here: the census may run an older vitpos

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        warn_long_warmup(WarmupCosine(1e-3, 0.0, 9, 10), 10, 0.9, 1)
        warn_long_warmup(WarmupCosine(0.0, 0.0, 10, 10), 10, 1.0, 1)  # a learning rate of 0 has no schedule
    assert [str(w.message) for w in said] == []
    with pytest.warns(UserWarning, match=r"warmup_epochs 1 is at least .* reaching 0.001 at the last step \(100% of"):
        warn_long_warmup(WarmupCosine(1e-3, 0.0, 10, 10), 10, 1.0, 1)
