"""A command replaces or deletes only what its manifest says it wrote (``vitpos.ownership``), and the
compile caches live in a private folder (``vitpos.compile_cache``)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from vitpos.cli import main
from vitpos.compile_cache import compile_cache_dir, use_private_compile_caches
from vitpos.errors import VitposError
from vitpos.files import write_json
from vitpos.ownership import MANIFEST, OutputError, check_outputs, claim, owners, record, recording, start_over

from .commands.test_analysis_commands import PYRAMID_ARGS

ANALYSES = {
    "similarity": [],
    "attention": ["--images=2"],
    "probe": ["--absolute=sincos2d"],
    "awareness": ["--absolute=sincos2d", "--images=8"],
    "equivariance": ["--absolute=none", "--shift=2,-1"],
    "relative-bias": ["--relative=irpe:product:ctx:k", "--images=2", "--per-side=2"],
}
TINY = ["--img-size=32", "--depth=1", "--head=gap", "--no-progress"]


def test_a_file_is_its_writers_while_it_is_as_written(tmp_path):
    (tmp_path / "a.json").write_text("1")
    record(tmp_path / "a.json", "eval")
    assert owners(tmp_path) == {"a.json": "eval"}
    (tmp_path / "a.json").write_text("22")  # edited since: no one's
    assert owners(tmp_path) == {}
    with open(tmp_path / MANIFEST, "a") as f:
        f.write('{"name": "cut')  # a line cut by a crash is skipped
    record(tmp_path / "a.json", "eval")
    assert owners(tmp_path) == {"a.json": "eval"}


def test_a_manifest_line_naming_a_file_outside_its_folder_never_counts(tmp_path):
    (tmp_path / "outside.txt").write_text("mine")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "link").symlink_to(tmp_path)
    info = (tmp_path / "outside.txt").stat()
    lines = [
        {"name": name, "by": "study", "size": info.st_size, "mtime_ns": info.st_mtime_ns}
        for name in ("../outside.txt", str(tmp_path / "outside.txt"), "link/outside.txt")
    ]
    (tmp_path / "run" / MANIFEST).write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert owners(tmp_path / "run") == {}
    with pytest.raises(OutputError, match="also holds link"):
        start_over(tmp_path / "run", "study", "--fresh")
    assert (tmp_path / "outside.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: p.write_text("mine"), r"a\.json was not written by vitpos eval \(no record"),
        (lambda p: (p.write_text("x"), record(p, "train")), r"a\.json was written by vitpos train, not vitpos eval"),
        (lambda p: p.symlink_to(p.parent / "elsewhere"), r"a\.json is a link, which vitpos never replaces"),
        (lambda p: (p.write_text("x"), record(p, "eval")), r"a\.json holds the result of an earlier vitpos eval; pass"),
    ],
    ids=["a user's file", "another command's", "a link", "its own earlier result"],
)
def test_check_outputs_refuses_what_is_not_the_commands_to_replace(make, message, tmp_path):
    make(tmp_path / "a.json")
    with pytest.raises(OutputError, match=message):
        check_outputs([tmp_path / "a.json"], "eval", force=False)


def test_force_replaces_the_commands_own_file_and_records_the_new_one(tmp_path):
    with recording("eval"):
        check_outputs([tmp_path / "a.json"], "eval", force=False)
        write_json(tmp_path / "a.json", {"run": 1})
        check_outputs([tmp_path / "a.json"], "eval", force=True)
        write_json(tmp_path / "a.json", {"run": 2})
        write_json(tmp_path / "b.json", {})  # not claimed: not recorded
    assert owners(tmp_path) == {"a.json": "eval"}
    (tmp_path / "a.json").write_text("edited")
    with pytest.raises(OutputError, match="--force replaces only the files vitpos eval wrote"):
        check_outputs([tmp_path / "a.json"], "eval", force=True)


def test_start_over_deletes_only_its_own_files_all_or_nothing(tmp_path):
    with recording("study"):
        claim(tmp_path)
        write_json(tmp_path / "study.json", {})
        write_json(tmp_path / "cells" / "f" / "a.json", {})
    assert owners(tmp_path) == {"study.json": "study", "cells/f/a.json": "study"}
    (tmp_path / "thesis.tex").write_text("mine")
    (tmp_path / "data").symlink_to(tmp_path / "cells")
    with pytest.raises(
        OutputError, match=r"also holds data, thesis\.tex, which it did not write .*nothing was deleted"
    ):
        start_over(tmp_path, "study", "--fresh")
    assert (tmp_path / "study.json").is_file() and (tmp_path / "cells" / "f" / "a.json").is_file()
    (tmp_path / "thesis.tex").unlink()
    (tmp_path / "data").unlink()
    start_over(tmp_path, "study", "--fresh")
    assert sorted(os.listdir(tmp_path)) == [MANIFEST] and owners(tmp_path) == {}


@pytest.mark.parametrize("command", sorted(ANALYSES))
def test_an_analysis_run_twice_keeps_its_first_results_or_replaces_only_its_own(command, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [command, *TINY, *ANALYSES[command], f"--out={out}"]
    assert main(argv) == 0
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(argv) == 2
    assert f"holds the results of an earlier vitpos {command} (" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "notes.txt"} == written
    assert main([*argv, "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and set(os.listdir(out)) == {*written, "notes.txt"}


def test_force_removes_the_stale_pages_of_an_earlier_run(tmp_path):
    out = tmp_path / "out"
    assert main(["similarity", *PYRAMID_ARGS["pvt"], "--absolute=sincos2d", f"--out={out}", "--no-progress"]) == 0
    assert (out / "similarity_stage0.png").is_file()
    assert main(["similarity", *TINY, f"--out={out}", "--force"]) == 0
    assert sorted(os.listdir(out)) == [MANIFEST, "similarity.json", "similarity.png"]


def test_a_study_started_over_writes_afresh_and_keeps_nothing_of_the_earlier_one(tmp_path, monkeypatch, capsys):
    from vitpos.commands import study as command

    def fake_study(config, folder, **kwargs):  # what a study writes, without the training
        write_json(folder / "study.json", {"train_size": config.train_size})
        write_json(folder / "cells" / "sincos2d" / f"n{config.train_size}.json", {})

    monkeypatch.setattr(command, "run_study", fake_study)
    out = tmp_path / "s"
    (out / "cells" / "sincos2d").mkdir(parents=True)
    (out / "cells" / "sincos2d" / "n64.json").write_text("mine")  # a new study replaces no file of the folder's
    assert main(["study", "--train-size=64", "--efficiency-sizes=32", f"--out={out}"]) == 2
    assert "n64.json was not written by vitpos study" in capsys.readouterr().err
    assert (out / "cells" / "sincos2d" / "n64.json").read_text() == "mine"
    (out / "cells" / "sincos2d" / "n64.json").unlink()
    (out / "study.json").unlink()
    assert main(["study", "--train-size=64", "--efficiency-sizes=32", f"--out={out}"]) == 0
    assert main(["study", "--train-size=96", "--efficiency-sizes=32", "--fresh", f"--out={out}"]) == 0
    assert sorted(p.name for p in (out / "cells" / "sincos2d").iterdir()) == ["n96.json"]
    assert json.loads((out / "study.json").read_text()) == {"train_size": 96}


def test_the_compile_caches_go_to_a_private_folder_unless_the_user_set_them(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    folder = use_private_compile_caches()
    assert folder == compile_cache_dir() == tmp_path / "vitpos" / "compile"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "mine")  # the user's choice stands
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert cache_dir() == str(folder / "inductor")


def test_a_compile_cache_folder_that_is_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "vitpos").mkdir()
    (tmp_path / "vitpos" / "compile").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(VitposError, match=r"compile cache \S+ is not a folder \(a link or a file\); torch.compile"):
        use_private_compile_caches()
