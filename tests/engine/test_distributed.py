"""Sharding, and a two-process torchrun (gloo, CPU) run against one process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vitpos.engine import train
from vitpos.engine.distributed import Dist, epoch_batches, eval_batches

from .conftest import TINY_MODEL, tiny_request, without_times

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_ranks_split_each_global_batch():
    one = epoch_batches(100, 16, seed=3, epoch=2, ctx=Dist())
    ranks = [epoch_batches(100, 16, seed=3, epoch=2, ctx=Dist(r, 4)) for r in range(4)]
    assert len(one) == 6 and all(len(b) == 4 for shard in ranks for b in shard)
    for step, batch in enumerate(one):
        assert torch.equal(torch.cat([shard[step] for shard in ranks]), batch)
    assert not torch.equal(one[0], epoch_batches(100, 16, seed=3, epoch=3, ctx=Dist())[0])
    with pytest.raises(ValueError, match="does not split evenly over 3 processes"):
        epoch_batches(100, 16, 0, 0, Dist(0, 3))
    with pytest.raises(ValueError, match="larger than the training split"):
        epoch_batches(10, 16, 0, 0, Dist())


def test_evaluation_shards_cover_every_sample_once():
    shards = [torch.cat(eval_batches(103, 8, Dist(r, 3))) for r in range(3)]
    assert sorted(torch.cat(shards).tolist()) == list(range(103))


def test_two_process_run_matches_one_process(tmp_path):
    request = tiny_request(n=256, epochs=2, batch_size=32)
    model_flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.items()]
    train_flags = [f"--{k.replace('_', '-')}={v}" for k, v in request.train.items() if k != "progress"]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "vitpos",
        "train",
        "--model=thesis_vit",
        *model_flags,
        *train_flags,
        f"--run-dir={tmp_path / 'ddp'}",
        "--no-progress",
        "--device=cpu",
    ]
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder") == 1  # one writer

    single = train(*tiny_request(n=256, epochs=2, batch_size=32, run_dir=str(tmp_path / "one")).resolve())
    rows = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    for ddp_row, one_row in zip(without_times(rows), without_times(single.history), strict=True):
        assert ddp_row.keys() == one_row.keys()
        for key in ddp_row:
            assert ddp_row[key] == pytest.approx(one_row[key], rel=1e-5, abs=1e-6), key
    entries = sorted(p.name for p in (tmp_path / "ddp" / "checkpoints").iterdir())
    assert entries == ["latest", "step-00000016"]
