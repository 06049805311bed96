"""Streaming WebDataset shards for training: whole shards per process and worker, a shuffle buffer, exact epochs.

Each epoch shuffles the shard order by (seed, epoch); process ``r`` of ``world`` takes shards
``r, r + world, ...`` and its loading worker ``w`` of ``W`` takes every ``W``-th of those. A
worker reads its shards front to back with the standard library's streaming tar reader (no
seeking), passes the samples through a shuffle buffer, and cuts them into batches. The epoch
has exactly the steps of one pass over all samples on every process: a worker whose shards run
out starts over on them, one with samples left stops (WebDataset's ``with_epoch``). With
repeated augmentation every sample enters the buffer ``repeats`` times (its copies stay on one
process, unlike :mod:`vitpos.engine.sampling`). Batch ``j`` of the epoch is always made by
worker ``j % W`` from its own stream, so a run resumed at batch ``start`` (with the same number
of workers) sees the same batches; the crop of each sample is seeded by its position as in
:mod:`.views`.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .crops import TrainCrop
from .decode import open_image
from .shards import ShardImages, ShardSample
from .views import sample_rng

__all__ = ["ShardStream"]


def _stream_shard(shard: list[ShardSample]) -> Iterator[tuple[bytes, ShardSample]]:
    """The image bytes of a shard's samples, read front to back (a stream: no seeking)."""
    wanted = {s.name: s for s in shard}
    with tarfile.open(shard[0].shard, "r|") as tar:
        for member in tar:
            sample = wanted.get(member.name)
            if sample is not None:
                raw = tar.extractfile(member)
                assert raw is not None  # indexed members are regular files
                yield raw.read(), sample


class ShardStream(IterableDataset):
    """One epoch of one process's training batches from shards (see the module docstring)."""

    def __init__(
        self,
        split: ShardImages,
        crop: TrainCrop,
        *,
        seed: int,
        epoch: int,
        rank: int,
        world: int,
        local_batch: int,
        steps: int,
        start: int = 0,
        buffer: int = 1000,
        repeats: int = 1,
    ) -> None:
        self.split, self.crop, self.seed, self.epoch = split, crop, seed, epoch
        self.rank, self.world, self.local_batch, self.steps, self.start = rank, world, local_batch, steps, start
        self.buffer, self.repeats = buffer, repeats
        if len(split.shards) < world:
            raise ValueError(
                f"{len(split.shards)} training shard(s) for {world} processes: each process needs a shard of its own; "
                "write smaller shards (vitpos shard --per-shard)"
            )

    def _my_shards(self, worker: int, workers: int) -> list[list[ShardSample]]:
        order = torch.randperm(
            len(self.split.shards), generator=torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
        )
        mine = [self.split.shards[i] for i in order[self.rank :: self.world].tolist()]
        if len(mine) < workers:
            raise ValueError(
                f"process {self.rank} has {len(mine)} shard(s) for {workers} loading workers: use at most {len(mine)} "
                "workers or write smaller shards"
            )
        return mine[worker::workers]

    def _samples(
        self, shards: list[list[ShardSample]], rng: np.random.Generator
    ) -> Iterator[tuple[bytes, ShardSample]]:
        """Endless: the shards over and over, each sample ``repeats`` times, through the shuffle buffer."""
        held: list[tuple[bytes, ShardSample]] = []
        while True:
            read = 0
            for shard in shards:
                for item in _stream_shard(shard):
                    read += 1
                    for copy in [item] * self.repeats:
                        if len(held) < self.buffer:
                            held.append(copy)
                            continue
                        pick = int(rng.integers(len(held)))
                        out, held[pick] = held[pick], copy
                        yield out
            if not read:
                raise ValueError(f"shards {shards[0][0].shard} ... hold none of their indexed samples any more")

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        # the DataLoader collects from worker 0 first: it plays the part of the worker that owns batch `start`
        role = (worker + self.start) % workers
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, role])
        samples = self._samples(self._my_shards(role, workers), rng)
        for j in range(role, self.steps, workers):
            batch = [next(samples) for _ in range(self.local_batch)]
            if j < self.start:
                continue  # read before the resumed position: skipped without decoding
            images = []
            for k, (data, sample) in enumerate(batch):
                position = self.rank + self.world * (j * self.local_batch + k)
                with open_image(data, f"{sample.shard}:{sample.name}") as img:
                    images.append(self.crop(img, sample_rng(self.seed, self.epoch, position)))
            yield torch.stack(images), torch.tensor([sample.label for _, sample in batch])
