"""``vitpos shard``: every split written, shuffled by a seed, an output folder replaced all at once or not at all."""

import os
import re
import tarfile

import numpy as np
import pytest

from vitpos.cli import main
from vitpos.data import open_data, shard_writer
from vitpos.data.folders import load_folder_splits

from . import hostile_files as forge


@pytest.fixture
def folder(tmp_path):
    return forge.image_folder(tmp_path / "imgs", per_class=5)


def _labels(out, split):
    """The labels of a split's shards, in the order they were written."""
    found = []
    for path in sorted(out.glob(f"{split}-*.tar")):
        with tarfile.open(path) as tar:
            found += [int(tar.extractfile(m).read()) for m in tar if m.name.endswith(".cls")]
    return found


def test_each_split_is_shuffled_by_the_seed(folder, tmp_path, capsys):
    assert main(["shard", f"folder:{folder}", str(tmp_path / "out"), "--per-shard=4", "--seed=3", "--no-progress"]) == 0
    assert "each split's images shuffled with seed 3 (--no-shuffle keeps the folder's order)" in capsys.readouterr().out
    splits = load_folder_splits(folder)
    rng = np.random.default_rng(3)
    for name in ("train", "val"):  # the same generator, split after split
        labels = [label for _, label in splits.split(name).samples]
        assert _labels(tmp_path / "out", name) == [labels[i] for i in rng.permutation(len(labels))]
    assert _labels(tmp_path / "out", "train") != sorted(_labels(tmp_path / "out", "train"))
    assert main(["shard", f"folder:{folder}", str(tmp_path / "kept"), "--no-shuffle", "--no-progress"]) == 0
    assert "in the folder's order" in capsys.readouterr().out
    assert _labels(tmp_path / "kept", "train") == [0] * 5 + [1] * 5


def test_progress_bar_on_stderr_unless_turned_off(folder, tmp_path, capsys):
    assert main(["shard", f"folder:{folder}", str(tmp_path / "a")]) == 0
    assert re.search(r"shard: 100%.* 12/12 ", capsys.readouterr().err)
    assert main(["shard", f"folder:{folder}", str(tmp_path / "b"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_overwrite_replaces_every_old_shard(folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["shard", f"folder:{folder}", str(out), "--per-shard=1", "--no-progress"]) == 0
    assert len(list(out.glob("train-*.tar"))) == 10
    assert main(["shard", f"folder:{folder}", str(out), "--per-shard=4", "--no-progress", "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        ".vitpos-manifest.jsonl",
        "classes.txt",
        "train-000000.tar",
        "train-000001.tar",
        "train-000002.tar",
        "val-000000.tar",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imgs", "out"]  # no temporary folder left
    spec = re.findall(r"--data '(wds:[^']+)'", capsys.readouterr().out)[-1]
    assert len(open_data(spec).train) == 10


def test_a_failed_write_leaves_the_old_shards(folder, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert main(["shard", f"folder:{folder}", str(out), "--no-progress"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("vitpos.commands.shard.write_shards", fail)
    assert main(["shard", f"folder:{folder}", str(out), "--no-progress", "--overwrite", "--seed=1"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imgs", "out"]


def test_a_test_pattern_gives_the_test_split(tmp_path):
    forge.shards(tmp_path, count=3, per_shard=2)
    data = open_data(f"wds:{tmp_path}/s-0.tar:val={tmp_path}/s-1.tar:test={tmp_path}/s-2.tar")
    assert [s.samples[0].shard.name for s in (data.train, data.val, data.test)] == ["s-0.tar", "s-1.tar", "s-2.tar"]


def test_only_shards_count_as_its_own_files():
    assert all(shard_writer.SHARD_NAME.fullmatch(n) for n in ("train-000000.tar", "test-123456.tar"))
    assert not any(shard_writer.SHARD_NAME.fullmatch(n) for n in ("train-0.tar", "notes.tar", "val-000001.tar.bak"))


def test_only_a_killed_runs_temporary_folder_is_removed(folder, tmp_path, capsys):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, alive = tmp_path / f".out.writing-{gone.pid}", tmp_path / f".out.writing-{os.getppid()}"
    other = tmp_path / f".other.writing-{gone.pid}"  # beside another output: not this run's to remove
    for left in (dead, alive, other):
        left.mkdir()
    assert main(["shard", f"folder:{folder}", str(tmp_path / "out"), "--no-progress"]) == 0
    assert f"removed {dead}, the temporary folder of an earlier vitpos shard" in capsys.readouterr().out
    assert not dead.exists() and alive.exists() and other.exists()


def test_overwrite_replaces_its_own_shards_only(folder, tmp_path):
    out = tmp_path / "out"
    assert main(["shard", f"folder:{folder}", str(out), "--no-progress"]) == 0
    assert main(["shard", f"folder:{folder}", str(out), "--no-progress", "--overwrite", "--seed=2"]) == 0
    forge.shards(tmp_path / "other", count=1)  # a tar of another key scheme, named like a shard
    (tmp_path / "other" / "s-0.tar").replace(out / "val-000000.tar")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["shard", f"folder:{folder}", str(out), "--no-progress", "--overwrite"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_link_out_stays_a_link_and_a_parked_link_is_never_said_removed(folder, tmp_path, capsys):
    """OUT a link: the shards go to the folder it names, with nothing left beside; a link an earlier version
    parked as ``.OUT.replaced-PID`` is the user's: kept, and not reported as removed."""
    import subprocess
    import sys

    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    parked = tmp_path / f".real.replaced-{gone.pid}"
    parked.symlink_to(tmp_path / "real")
    for flags in ([], ["--overwrite", "--seed=1"]):
        assert main(["shard", f"folder:{folder}", str(tmp_path / "out"), "--no-progress", *flags]) == 0
        assert "removed" not in capsys.readouterr().out
    assert (tmp_path / "out").is_symlink() and (tmp_path / "out" / "train-000000.tar").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [parked.name, "imgs", "out", "real"]
