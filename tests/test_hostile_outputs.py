"""Outputs as a user would point them: at a folder of their own files, at another command's files, at a
command's earlier results, at a link. A command replaces or deletes only what it wrote itself
(:mod:`vitpos.ownership`), and says ``--force`` (or ``--fresh``, ``--overwrite``) where that applies.

Each row is run and judged by :mod:`tests.hostile_harness` (the files it names must be left exactly
as they were); ``python tests/hostile_census.py`` counts the outcomes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

import vitpos
from vitpos.cli import main
from vitpos.deploy import export_model, load_deployed

from .commands.test_convert import DATA, released_thesis_vit
from .hostile_harness import Case, run_row

STUDY = ["study", "--family=sincos2d", "--seeds=1", "--epochs=1", "--train-size=64", "--efficiency-sizes=32"]
TINY_ANALYSIS = ["--img-size=32", "--depth=1", "--head=gap"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


def _user_folder(tmp: Path, settings: str = "{}") -> Path:
    """A folder of the user's: a thesis and a ``study.json`` of their own."""
    folder = tmp / "p"
    folder.mkdir()
    (folder / "study.json").write_text(settings)
    (folder / "thesis.tex").write_text("\\documentclass{article}\n")
    return folder


def _fresh_over_a_users_folder(tmp: Path) -> Case:
    folder = _user_folder(tmp)
    # --device cuda:7 fails after the folder was started over, so no study runs either way
    return Case([*STUDY, "--fresh", "--device=cuda:7", f"--out={folder}"], guarded=[folder])


def _study_json(text: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        folder = _user_folder(tmp, text)
        return Case([*STUDY, "--device=cpu", f"--out={folder}"], guarded=[folder])

    return build


def _train_into_a_users_folder(tmp: Path) -> Case:
    folder = tmp / "mine"
    folder.mkdir()
    (folder / "config.yaml").write_text("my settings\n")
    data = "--data=synthetic:direction:img=16:train=16:val=8:test=8"
    argv = ["train", "--model=thesis_vit", "--img-size=16", "--depth=1", data, "--epochs=1", "--batch-size=8"]
    return Case([*argv, "--no-progress", f"--run-dir={folder}"], guarded=[folder / "config.yaml"])


def _converted(tmp: Path) -> Path:
    """A folder ``vitpos convert`` wrote: model.safetensors and config.yaml."""
    run = tmp / "run"
    assert main(["convert", str(released_thesis_vit(tmp)), str(run), "--model=thesis_vit", "--no-progress"]) == 0
    return run


def _eval_out(name: str) -> Callable[[Path], Case]:
    def build(tmp: Path) -> Case:
        run = _converted(tmp)
        return Case(["eval", f"--checkpoint={run}", DATA, f"--out={run / name}", "--no-progress"], guarded=[run])

    return build


def _eval_again(*options: str) -> Callable[[Path], Case]:
    """A second eval of a folder: the same options (refused) or others (a file of its own, the first kept)."""

    def build(tmp: Path) -> Case:
        run = _converted(tmp)
        argv = ["eval", f"--checkpoint={run}", DATA, "--no-progress"]
        assert main(argv) == 0
        first = [run / "eval-test.json", run / "eval-test.md"]
        if not options:
            return Case(argv, guarded=[run])
        swept = run / "eval-test-at32,48.json"
        return Case(
            [*argv, *options],
            guarded=first,
            answer=0,
            after=lambda: (
                "32x32" not in json.loads(first[0].read_text())["results"]
                or len(json.loads(swept.read_text())["results"]) == 2
            ),
        )

    return build


def _analysis_twice(tmp: Path) -> Case:
    out = tmp / "sim"
    argv = ["similarity", *TINY_ANALYSIS, f"--out={out}", "--no-progress"]
    assert main(argv) == 0
    (out / "notes.txt").write_text("mine")
    return Case(argv, guarded=[out])


def _analysis_over_a_users_file(tmp: Path) -> Case:
    """--force replaces the command's own results only: a user's file under one of its names is kept."""
    out = tmp / "sim"
    out.mkdir()
    (out / "similarity.json").write_text("my notes\n")
    return Case(
        ["similarity", *TINY_ANALYSIS, f"--out={out}", "--force", "--no-progress"], guarded=[out / "similarity.json"]
    )


def _exported_with_another_exports_config(tmp: Path) -> Case:
    """``m.pt2`` beside the ``m.yaml`` an ONNX export wrote (the name both shared before)."""
    torch.manual_seed(0)
    model = vitpos.create_model("thesis_vit", img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2)
    path = tmp / "m.pt2"
    meta = export_model(model.eval(), path, fmt="pt2", min_size=16, max_size=32)
    config = yaml.safe_load(meta.read_text())
    config["export"]["format"] = "onnx"
    meta.unlink()
    (tmp / "m.yaml").write_text(yaml.safe_dump(config))
    return Case(call=lambda: load_deployed(path), guarded=[tmp])


def _private_compile_cache(mode: int) -> Callable[[Path], Case]:
    """``--compile``'s caches in a folder others can write to: refused, not used."""

    def build(tmp: Path) -> Case:
        cache = tmp / "vitpos" / "compile"
        cache.mkdir(parents=True)
        cache.chmod(mode)
        env = {"XDG_CACHE_HOME": str(tmp), "TORCHINDUCTOR_CACHE_DIR": "", "TRITON_CACHE_DIR": ""}
        return Case(call=_use_compile_caches, env=env, guarded=[tmp])

    return build


def _use_compile_caches() -> None:
    from vitpos.compile_cache import use_private_compile_caches

    use_private_compile_caches()


ROWS: list[tuple[str, Callable[[Path], Case], str]] = [
    (
        "study --fresh over a user's folder with a study.json",
        _fresh_over_a_users_folder,
        r"--fresh deletes only the files vitpos study wrote, and \S*/p also holds study\.json, thesis\.tex, which it "
        r"did not write .*nothing was deleted",
    ),
    (
        "study.json holding a JSON list",
        _study_json("[1, 2]"),
        r"p/study\.json holds a JSON list, not a study's settings .*choose another --out",
    ),
    ("study.json not JSON", _study_json("{not json"), r"p/study\.json is not valid JSON \(Expecting property name"),
    (
        "train --run-dir a folder with a config.yaml of the user's",
        _train_into_a_users_folder,
        r"mine/config\.yaml was not written by vitpos train \(no record .*\); it is left as it is",
    ),
    (
        "eval --out over the run's config",
        _eval_out("config.yaml"),
        r"run/config\.yaml was written by vitpos convert, not vitpos eval; --force replaces only the files vitpos "
        r"eval wrote",
    ),
    (
        "eval --out x.md",
        _eval_out("x.md"),
        r"--out \S*x\.md: the table is written beside FILE as FILE\.md; name a \.json",
    ),
    (
        "eval again with the same options",
        _eval_again(),
        r"run/eval-test\.json holds the result of an earlier vitpos eval; pass --force to replace it",
    ),
    ("eval again at other sizes", _eval_again("--resolutions=32,48"), r"wrote \S*/eval-test-at32,48\.json"),
    (
        "similarity twice into one folder",
        _analysis_twice,
        r"sim holds the results of an earlier vitpos similarity \(similarity\.json, similarity\.png\); pass --force",
    ),
    (
        "similarity --force over a user's file",
        _analysis_over_a_users_file,
        r"sim/similarity\.json was not written by vitpos similarity \(no record of it in .*\); it is left as it is",
    ),
    (
        "load_deployed with another export's m.yaml",
        _exported_with_another_exports_config,
        r"m\.yaml describes an ONNX export, but \S*m\.pt2 is a torch\.export archive .*export m\.pt2 again",
    ),
    (
        "--compile caches in a folder all can write",
        _private_compile_cache(0o777),
        r"compile cache \S*vitpos/compile can be written by other users \(mode 0o777\); .*chmod 700",
    ),
]


@pytest.mark.parametrize("build,pattern", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_output_is_refused_clearly_and_touches_nothing(
    build, pattern, tmp_path, monkeypatch, capsys, record_property
):
    run_row(build, pattern, tmp_path, monkeypatch, capsys, record_property)


def test_an_exported_file_keeps_its_own_config_beside_another_export(tmp_path, capsys):
    """``m.pt2`` and ``m.onnx`` each get their own YAML; an export of an earlier version (``m.yaml``) still loads."""
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    base = ["export", "--model=thesis_vit", "--img-size=16", "--depth=1", "--min-size=16", "--max-size=32"]
    for fmt in ("pt2", "onnx"):
        assert main([*base, f"--format={fmt}", str(tmp_path / f"m.{fmt}"), "--no-progress"]) == 0
    x = torch.randn(1, 3, 16, 16)
    outputs = {}
    for fmt in ("pt2", "onnx"):
        config = yaml.safe_load((tmp_path / f"m.{fmt}.yaml").read_text())
        assert config["export"]["format"] == fmt
        outputs[fmt] = load_deployed(tmp_path / f"m.{fmt}")(x)
    torch.testing.assert_close(outputs["pt2"], outputs["onnx"], atol=1e-4, rtol=1e-4)
    shutil.move(tmp_path / "m.pt2.yaml", tmp_path / "m.yaml")
    torch.testing.assert_close(load_deployed(tmp_path / "m.pt2")(x), outputs["pt2"])
