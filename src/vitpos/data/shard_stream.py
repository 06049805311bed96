"""Streaming WebDataset shards for training: every sample once an epoch, split over processes and workers.

Each epoch shuffles the shard order by (seed, epoch) and lays the shards' samples end to end
(each ``repeats`` times in a row with repeated augmentation). The epoch is the first ``steps``
global batches of that sequence: whole batches, so the few samples left at its end wait for
another epoch, in which another shard comes last. Process ``r`` of ``world`` takes the
``r``-th contiguous part of the epoch, and in it loading worker ``w`` of ``W`` the contiguous
part that fills batches ``w, w + W, ...``. So every sample of the epoch is read once, by one
worker of one process, and every process has the same number of steps whatever its shards hold,
for any number of workers (a worker's part may begin or end inside a shard). A worker reads its
part front to back, one open file a shard, through a shuffle buffer that holds each sample once
and empties at the end (WebDataset's non-resampled mode), and cuts the samples into batches.

With ``:resample`` (:attr:`~.shards.ShardImages.resample`) a worker instead draws shards at
random with replacement, seeded by (seed, epoch, process, worker), until its batches are full
(WebDataset's resampled mode with ``with_epoch``): an epoch then shows some samples twice and
others not at all. Batch ``j`` of the epoch is always made by worker ``j % W`` from its own
part, so a run resumed at batch ``start`` (with the same number of workers and the same buffer)
sees the same batches; the crop of each sample is seeded by its position as in :mod:`.views`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..errors import VitposError
from .crops import TrainCrop
from .decode import open_image
from .shards import ShardImages, ShardSample
from .views import sample_rng

__all__ = ["ShardStream", "shuffle_buffer"]

T = TypeVar("T")


def shuffle_buffer(items: Iterable[T], size: int, rng: np.random.Generator) -> Iterator[T]:
    """``items`` through a shuffle buffer of ``size``: each comes out once, and the buffer empties at the end."""
    held: list[T] = []
    for item in items:
        if len(held) < size:
            held.append(item)
            continue
        pick = int(rng.integers(len(held)))
        out, held[pick] = held[pick], item
        yield out
    for pick in rng.permutation(len(held)).tolist():
        yield held[pick]


def _read(samples: Iterable[ShardSample]) -> Iterator[tuple[bytes, ShardSample]]:
    """The image bytes of ``samples`` in their order, each shard opened once for a run of its samples."""
    for shard, run in itertools.groupby(samples, key=lambda s: s.shard):
        with open(shard, "rb") as f:
            for sample in run:
                f.seek(sample.offset)
                data = f.read(sample.size)
                if len(data) != sample.size:
                    raise VitposError(
                        f"shard {shard} changed since it was opened: {sample.name} ends early; open the data again"
                    )
                yield data, sample


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
        if steps * world * local_batch > len(split) * repeats:
            raise ValueError(f"{steps} steps of {world} x {local_batch} samples need more than the {len(split)} held")

    def _epoch(self) -> list[ShardSample]:
        """The epoch's samples in order: the shards shuffled by (seed, epoch), each sample ``repeats`` times."""
        shards = self.split.shards
        order = torch.randperm(len(shards), generator=torch.Generator().manual_seed(self.seed * 7919 + self.epoch))
        every = (s for i in order.tolist() for s in shards[i] for _ in range(self.repeats))
        return list(itertools.islice(every, self.steps * self.world * self.local_batch))

    def _batches_of(self, role: int, workers: int) -> int:
        return len(range(role, self.steps, workers))

    def _part(self, role: int, workers: int) -> list[ShardSample]:
        """The samples worker ``role`` of ``workers`` reads this epoch, in file order."""
        first = self.rank * self.steps + sum(self._batches_of(r, workers) for r in range(role))
        count = self._batches_of(role, workers)
        return self._epoch()[first * self.local_batch : (first + count) * self.local_batch]

    def _drawn(self, rng: np.random.Generator) -> Iterator[ShardSample]:
        """Endless: shards drawn at random with replacement, each sample ``repeats`` times."""
        shards = self.split.shards
        while True:
            for sample in shards[int(rng.integers(len(shards)))]:
                yield from [sample] * self.repeats

    def samples(self, role: int, workers: int) -> Iterator[tuple[bytes, ShardSample]]:
        """What worker ``role`` of ``workers`` hands out this epoch: (image bytes, sample), shuffled."""
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, role])
        wanted = self._batches_of(role, workers) * self.local_batch
        if self.split.resample:
            drawn = self._drawn(np.random.default_rng([self.seed, self.epoch, self.rank, role, 1]))
            return itertools.islice(shuffle_buffer(_read(drawn), self.buffer, rng), wanted)
        return shuffle_buffer(_read(self._part(role, workers)), self.buffer, rng)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        # the DataLoader collects from worker 0 first: it plays the part of the worker that owns batch `start`
        role = (worker + self.start) % workers
        samples = self.samples(role, workers)
        for j in range(role, self.steps, workers):
            batch = list(itertools.islice(samples, self.local_batch))
            if j < self.start:
                continue  # read before the resumed position: skipped without decoding
            images = []
            for k, (data, sample) in enumerate(batch):
                position = self.rank + self.world * (j * self.local_batch + k)
                with open_image(data, f"{sample.shard}:{sample.name}") as img:
                    images.append(self.crop(img, sample_rng(self.seed, self.epoch, position)))
            yield torch.stack(images), torch.tensor([sample.label for _, sample in batch])
