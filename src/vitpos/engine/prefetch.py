"""Training batches on the device, the next one moved and augmented while the current one trains.

Batch ``k`` is augmented under the generator seed ``seed_of(k)``, and the step that trains on it
draws its own randomness (dropout, stochastic depth) from where the augmentation left the
generator, so a run's numbers do not depend on whether batches are prefetched. Batch ``k + 1`` is
prepared right after the step on batch ``k`` has been queued. With ``VITPOS_SIDE_STREAM=1`` on
CUDA, its copy from pinned memory and its augmentation run on a side stream, so the GPU computes
them while the step runs, and the main stream waits for the side stream only when it reaches
batch ``k + 1``; this is opt-in until a GPU measurement shows it correct and faster (part
"augment" of ``python -m bench.gpu --quick`` times the run both ways). Otherwise the work is
queued in order on the current stream. The time spent waiting for the loading workers is
counted: where it is a noticeable share of an epoch long enough to matter, a line says so and by
how much.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = ["DeviceBatches", "MIN_EPOCH_S", "WAIT_SHARE", "SIDE_STREAM_ENV"]

Augment = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any]]
WAIT_SHARE = 0.1
"""The share of an epoch spent waiting for batches above which :class:`DeviceBatches` reports it."""
MIN_EPOCH_S = 10.0
"""Seconds an epoch must last for its waiting to be reported: in a shorter one more loading workers
would save under a second or so, and its share is mostly the first batch's start-up."""
SIDE_STREAM_ENV = "VITPOS_SIDE_STREAM"
"""Set to 1 to prepare batches on a side CUDA stream."""


def _record(obj: Any, stream: torch.cuda.Stream) -> None:
    """Tell the caching allocator that every tensor in ``obj`` is used on ``stream`` from now on."""
    if isinstance(obj, torch.Tensor):
        obj.record_stream(stream)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            _record(getattr(obj, f.name), stream)


class DeviceBatches:
    """``(images, targets, labels)`` per host batch: augmented images and targets and the labels as
    loaded, all on ``device``; ``seed_of(k)`` seeds batch ``k``'s augmentation."""

    def __init__(
        self,
        batches: Iterable[tuple[torch.Tensor, Any]],
        augment: Augment,
        device: torch.device,
        seed_of: Callable[[int], int],
        report: Callable[[str], None] | None = None,
        source: str = "the data loader",
    ) -> None:
        self.batches, self.augment, self.device, self.seed_of = batches, augment, device, seed_of
        self.report, self.source = report, source
        side = device.type == "cuda" and os.environ.get(SIDE_STREAM_ENV, "").strip() == "1"
        self.stream = torch.cuda.Stream(device) if side else None
        self.waited_s = 0.0
        """Seconds spent waiting for host batches in the last pass."""

    def _prepare(self, host: tuple[torch.Tensor, Any], k: int) -> tuple[torch.Tensor, Any, Any]:
        torch.manual_seed(self.seed_of(k))
        with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
            images, labels = (t.to(self.device, non_blocking=True) for t in host)
            x, y = self.augment(images, labels)
        return x, y, labels

    def _hand_over(self, batch: tuple[torch.Tensor, Any, Any]) -> tuple[torch.Tensor, Any, Any]:
        if self.stream is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self.stream)
            for part in batch:
                _record(part, current)
        return batch

    def _next(self, batches: Iterator[tuple[torch.Tensor, Any]]) -> tuple[torch.Tensor, Any] | None:
        start = time.perf_counter()
        host = next(batches, None)
        self.waited_s += time.perf_counter() - start
        return host

    def __iter__(self) -> Iterator[tuple[torch.Tensor, Any, Any]]:
        self.waited_s, began = 0.0, time.perf_counter()
        batches = iter(self.batches)
        host, k = self._next(batches), 0
        while host is not None:
            prepared = self._prepare(host, k)
            yield self._hand_over(prepared)  # the consumer queues its step on this batch ...
            host, k = self._next(batches), k + 1  # ... and the next batch is prepared while it runs
        self._report(time.perf_counter() - began)

    def _report(self, elapsed: float) -> None:
        if self.report is None or elapsed < MIN_EPOCH_S or self.waited_s < WAIT_SHARE * elapsed:
            return
        self.report(
            f"data loading is the bottleneck: {self.waited_s:.1f} s of this epoch's {elapsed:.1f} s "
            f"({self.waited_s / elapsed:.0%}) went to waiting for batches from {self.source}; more loading "
            "workers (--workers, one per free core) would feed the step faster"
        )
