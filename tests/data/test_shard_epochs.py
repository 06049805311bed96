"""Exact epochs over shards: every training sample once an epoch, for any number of processes and workers;
resampling only when asked."""

from types import SimpleNamespace

import numpy as np
import pytest

from vitpos.data import open_data, shard_stream
from vitpos.data.crops import TrainCrop
from vitpos.data.loader import worker_batches
from vitpos.data.shard_stream import ShardStream, shuffle_buffer

from . import hostile_files as forge

SIZES = (3, 7, 4, 6)
"""Training shards of unequal sizes: 20 samples, labelled 0 .. 19, so a label names its sample."""


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wds")
    label = 0
    for s, size in enumerate(SIZES):
        samples = []
        for i in range(size):
            samples.append((f"{s}{i:03d}", forge.png(8, 8, 10 * i), b"%d" % label))
            label += 1
        forge.write_tar(folder / f"s-{s}.tar", samples)
    forge.write_tar(folder / "v.tar", [("v", forge.png(8, 8), b"1")])
    return folder


def _stream(data, rank, world, batch, epoch=0, buffer=1000):
    crop = TrainCrop((4, 4), scale=None, hflip=0.0)
    steps = len(data.train) // batch
    return ShardStream(
        data.train, crop, seed=3, epoch=epoch, rank=rank, world=world, local_batch=batch // world, steps=steps,
        buffer=buffer,
    )  # fmt: skip


def _epoch_labels(data, world, workers, batch, monkeypatch, epoch=0) -> list[int]:
    """Every label of one epoch's batches, over every process and (in-process) worker; checks each process's steps."""
    labels = []
    for rank in range(world):
        stream = _stream(data, rank, world, batch, epoch)
        batches = []
        for worker in range(workers):
            monkeypatch.setattr(
                shard_stream, "get_worker_info", lambda w=worker: SimpleNamespace(id=w, num_workers=workers)
            )
            batches += list(stream)
        assert len(batches) == len(data.train) // batch  # the same steps on every process
        assert all(len(y) == batch // world for _, y in batches)
        labels += [int(y) for _, ys in batches for y in ys]
    return labels


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_an_epoch_visits_every_sample_once(shards, world, workers, monkeypatch):
    data = open_data(f"wds:{shards}/s-{{0..3}}.tar:val={shards}/v.tar")
    assert len(data.train) == 20
    # the shuffle buffer (1,000) is larger than any worker's part: it still hands out each sample once
    assert sorted(_epoch_labels(data, world, workers, 4, monkeypatch)) == list(range(20))
    # 20 samples in whole batches of 6: 18 of them, none twice
    labels = _epoch_labels(data, world, workers, 6, monkeypatch, epoch=1)
    assert len(labels) == len(set(labels)) == 18


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_worker_processes_hand_out_the_epoch_once(shards):
    """Three loading worker processes over two shards (more workers than shards): each sample once."""
    data = open_data(f"wds:{shards}/s-{{0..1}}.tar:val={shards}/v.tar")
    batches = list(worker_batches(_stream(data, 0, 1, 2), 3))
    assert len(batches) == 5
    assert sorted(int(y) for _, ys in batches for y in ys) == list(range(10))


def test_the_shuffle_buffer_never_repeats_an_item():
    rng = np.random.default_rng(0)
    for size in (1, 3, 10, 1000):
        out = list(shuffle_buffer(range(10), size, rng))
        assert sorted(out) == list(range(10))
    assert list(shuffle_buffer(range(10), 1, rng)) == list(range(10))  # a buffer of one keeps the order
    assert list(shuffle_buffer(range(10), 4, rng)) != list(range(10))


def test_resampling_only_when_asked_and_said(shards, monkeypatch):
    data = open_data(f"wds:{shards}/s-{{0..3}}.tar:val={shards}/v.tar:resample")
    assert data.train.resample and not open_data(f"wds:{shards}/s-{{0..3}}.tar:val={shards}/v.tar").train.resample
    assert "each epoch draws as many samples as the 4 training shard(s) hold (20)" in data.made
    labels = _epoch_labels(data, 2, 2, 4, monkeypatch)
    assert len(labels) == 20 and len(set(labels)) < 20  # drawn with replacement: some twice
    assert set(labels) <= set(range(20))


def _global_batches(data, world, workers, batch, monkeypatch, epoch=0, start=0) -> list[list[int]]:
    """The labels of each global batch of one epoch from batch ``start`` on, gathered over every process and
    (in-process) worker."""
    steps = len(data.train) // batch
    made: dict[int, list[int]] = {j: [] for j in range(start, steps)}
    crop = TrainCrop((4, 4), scale=None, hflip=0.0)
    for rank in range(world):
        stream = ShardStream(
            data.train, crop, seed=3, epoch=epoch, rank=rank, world=world, local_batch=batch // world, steps=steps,
            start=start, buffer=5,
        )  # fmt: skip
        for worker in range(workers):
            monkeypatch.setattr(
                shard_stream, "get_worker_info", lambda w=worker: SimpleNamespace(id=w, num_workers=workers)
            )
            # a worker makes batches start + worker, start + worker + workers, ...
            for j, (_, ys) in zip(range(start + worker, steps, workers), stream, strict=True):
                made[j] += [int(y) for y in ys]
    return [made[j] for j in range(start, steps)]


@pytest.fixture(scope="module")
def lopsided(tmp_path_factory):
    """One training shard of 10 samples and one of 1 (labels 0 .. 10), and a validation shard."""
    folder = tmp_path_factory.mktemp("tails")
    forge.write_tar(folder / "ten.tar", [(f"{i:03d}", forge.png(8, 8, i), b"%d" % i) for i in range(10)])
    forge.write_tar(folder / "one.tar", [("010", forge.png(8, 8), b"10")])
    forge.write_tar(folder / "v.tar", [("v", forge.png(8, 8), b"1")])
    return folder


@pytest.mark.parametrize("shards,held", [("ten.tar", 10), ("{ten,one}.tar", 11)])
def test_every_sample_gets_a_turn_over_epochs(lopsided, shards, held, monkeypatch):
    """Whole batches of 4 leave 2 or 3 samples out of each epoch; which ones changes, so 20 epochs read every
    sample, each about as often (it always left out the same ones: a shard's last samples)."""
    data = open_data(f"wds:{lopsided}/{shards}:val={lopsided}/v.tar")
    counts = np.zeros(held, dtype=int)
    for epoch in range(20):
        labels = [y for b in _global_batches(data, 1, 2, 4, monkeypatch, epoch=epoch) for y in b]
        assert len(labels) == len(set(labels)) == 8  # within an epoch each sample once
        np.add.at(counts, labels, 1)
    assert counts.min() >= 8 and counts.max() <= 20, counts  # 160 reads of 10 or 11 samples: 14.5 to 16 each
    assert counts.sum() == 160


@pytest.mark.parametrize("before,after", [((2, 1), (1, 3)), ((1, 2), (4, 1)), ((4, 3), (2, 2))])
def test_a_resume_with_other_processes_and_workers_reads_the_rest_of_the_epoch(shards, before, after, monkeypatch):
    """An epoch stopped after batch 2 with (processes, workers) ``before`` and resumed with ``after``: every sample
    of the epoch read exactly once, in the very batches of the uninterrupted run."""
    data = open_data(f"wds:{shards}/s-{{0..3}}.tar:val={shards}/v.tar")
    for epoch in (0, 3):
        whole = _global_batches(data, 1, 1, 4, monkeypatch, epoch=epoch)
        first = _global_batches(data, *before, 4, monkeypatch, epoch=epoch)[:2]
        rest = _global_batches(data, *after, 4, monkeypatch, epoch=epoch, start=2)
        assert [sorted(b) for b in first + rest] == [sorted(b) for b in whole]
        assert sorted(y for b in first + rest for y in b) == list(range(20))
