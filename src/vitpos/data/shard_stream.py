"""Streaming WebDataset shards for training: every sample a turn, the same batches for any processes and workers.

Each epoch shuffles the shard order by (seed, epoch), lays the shards' samples end to end (each
``repeats`` times in a row with repeated augmentation) and starts that sequence at a point drawn
by (seed, epoch), going round to its beginning. The epoch is the first ``steps`` global batches
of it: whole batches, so the samples left at its end wait for another epoch. Where that end falls
changes from epoch to epoch, so every sample has the same chance to wait (a shard of 10 samples
read in batches of 4 leaves out another 2 each epoch, not always its last two). The kept samples
pass through a shuffle buffer of ``buffer`` samples (each comes out once, and it empties at the
end: WebDataset's non-resampled mode), computed on the samples' places alone, before anything is
read. Global batch ``j`` is then the ``j``-th run of ``world * local_batch`` samples of that
order, and process ``r`` takes the ``r``-th ``local_batch`` of it. So which samples form each
global batch, and each sample's crop (seeded by its place in the epoch, as in :mod:`.views`),
depend on neither the number of processes nor the number of loading workers: a run resumed at
batch ``start`` with others reads exactly the samples the stopped one had not, each once. Loading
worker ``w`` of ``W`` makes batches ``start + w, start + w + W, ...`` and reads each one's images
by their offsets, every shard it needs opened once a batch and checked to be the file that was
indexed (:meth:`~.shards.ShardSample.check`).

With ``:resample`` (:attr:`~.shards.ShardImages.resample`) a worker instead draws shards at
random with replacement, seeded by (seed, epoch, process, worker), until its batches are full
(WebDataset's resampled mode with ``with_epoch``): an epoch then shows some samples twice and
others not at all, and which depends on the number of processes and workers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .crops import TrainCrop
from .decode import open_image
from .shards import ShardImages, ShardSample
from .views import sample_rng

__all__ = ["ShardStream", "shuffle_buffer"]

T = TypeVar("T")


def shuffle_buffer(items: Iterable[T], size: int, rng: np.random.Generator) -> Iterator[T]:
    """``items`` through a shuffle buffer of ``size``: each comes out once, and the buffer empties at the end."""
    held: list[T] = []
    picks: Iterator[int] = iter(())
    for item in items:
        if len(held) < size:
            held.append(item)
            continue
        pick = next(picks, None)
        if pick is None:  # drawn in blocks: a full buffer always picks among `size`
            picks = iter(rng.integers(size, size=4096).tolist())
            pick = next(picks)
        out, held[pick] = held[pick], item
        yield out
    for pick in rng.permutation(len(held)).tolist():
        yield held[pick]


def _read(batch: list[ShardSample]) -> list[bytes]:
    """The image bytes of ``batch``, in its order; each shard it needs opened once and checked first."""
    found: list[bytes] = [b""] * len(batch)
    places = sorted(range(len(batch)), key=lambda i: (str(batch[i].shard), batch[i].offset))
    for _, group in itertools.groupby(places, key=lambda i: batch[i].shard):
        run = list(group)
        with batch[run[0]].open() as f:
            for i in run:
                found[i] = batch[i].read_from(f)
    return found


def _read_stream(samples: Iterable[ShardSample]) -> Iterator[tuple[bytes, ShardSample]]:
    """The image bytes of ``samples`` in their order, each shard opened once for a run of its samples."""
    for _, group in itertools.groupby(samples, key=lambda s: s.shard):
        run = list(group)
        with run[0].open() as f:
            for sample in run:
                yield sample.read_from(f), sample


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

    def epoch_order(self) -> list[ShardSample]:
        """The epoch's samples in the order global batches take them (see the module docstring)."""
        shards = self.split.shards
        generator = torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
        order = torch.randperm(len(shards), generator=generator).tolist()
        laid = [s for i in order for s in shards[i]]
        turn = int(torch.randint(len(laid), (1,), generator=generator))
        every = (s for s in laid[turn:] + laid[:turn] for _ in range(self.repeats))
        kept = list(itertools.islice(every, self.steps * self.world * self.local_batch))
        rng = np.random.default_rng([self.seed, self.epoch])
        return [kept[i] for i in shuffle_buffer(range(len(kept)), self.buffer, rng)]

    def _drawn(self, rng: np.random.Generator) -> Iterator[ShardSample]:
        """Endless: shards drawn at random with replacement, each sample ``repeats`` times."""
        shards = self.split.shards
        while True:
            for sample in shards[int(rng.integers(len(shards)))]:
                yield from [sample] * self.repeats

    def _batches(self, worker: int, workers: int) -> Iterator[tuple[int, list[tuple[bytes, ShardSample]]]]:
        """(batch number, its images and samples) for the batches this worker makes."""
        if self.split.resample:
            # batch j is always made by the worker of role j % workers, so a resumed run draws the same batches
            role = (worker + self.start) % workers
            rng = np.random.default_rng([self.seed, self.epoch, self.rank, role])
            drawn = self._drawn(np.random.default_rng([self.seed, self.epoch, self.rank, role, 1]))
            samples = shuffle_buffer(_read_stream(drawn), self.buffer, rng)
            for j in range(role, self.steps, workers):
                drawn_batch = list(itertools.islice(samples, self.local_batch))
                if j >= self.start:  # read before the resumed position: skipped without decoding
                    yield j, drawn_batch
            return
        order, width = self.epoch_order(), self.world * self.local_batch
        for j in range(self.start + worker, self.steps, workers):
            first = j * width + self.rank * self.local_batch
            batch = order[first : first + self.local_batch]
            yield j, list(zip(_read(batch), batch, strict=True))

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        # the DataLoader collects from worker 0 first: it makes batch `start`
        for j, batch in self._batches(worker, workers):
            images = []
            for k, (data, sample) in enumerate(batch):
                # the sample's place in the epoch, whatever the number of processes
                position = (j * self.world + self.rank) * self.local_batch + k
                with open_image(data, f"{sample.shard}:{sample.name}") as img:
                    images.append(self.crop(img, sample_rng(self.seed, self.epoch, position)))
            yield torch.stack(images), torch.tensor([sample.label for _, sample in batch])
