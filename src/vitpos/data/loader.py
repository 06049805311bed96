"""Data-loading worker processes that report a bad input as the error it is, not as a bug.

A ``DataLoader`` re-raises a worker's exception in the main process as a new exception whose
message is the worker's whole traceback, raised from inside torch. Here a worker hands back
vitpos's own errors (and file-system errors) as a value instead, and the main process raises
them with their message as it was: one clear line naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset

from ..errors import VitposError

__all__ = ["worker_batches"]

_REPORTED = (VitposError, OSError)


class _Failure:
    """A worker's error, handed back as a batch: its class and message."""

    def __init__(self, err: BaseException) -> None:
        self.kind, self.message = type(err), str(err)

    def raise_it(self) -> None:
        try:
            err = self.kind(self.message)
        except Exception:  # an error class that takes other arguments
            err = VitposError(self.message)
        raise err


class _Reporting(Dataset):
    """A map-style data set whose item is a :class:`_Failure` where reading it raised a reported error."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: Any) -> Any:
        try:
            return self.inner[index]
        except _REPORTED as err:
            return _Failure(err)


class _ReportingStream(IterableDataset):
    """A stream that ends with a :class:`_Failure` where reading it raised a reported error."""

    def __init__(self, inner: IterableDataset) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self.inner
        except _REPORTED as err:
            yield _Failure(err)


def worker_batches(
    dataset: Dataset, workers: int, sampler: Iterable[Any] | None = None, pin_memory: bool = False
) -> Iterator[Any]:
    """``dataset``'s batches (one per ``sampler`` item, or the stream's) loaded in ``workers`` processes."""
    wrapped = _ReportingStream(dataset) if isinstance(dataset, IterableDataset) else _Reporting(dataset)
    loader = DataLoader(wrapped, sampler=sampler, batch_size=None, num_workers=workers, pin_memory=pin_memory)
    for batch in loader:
        if isinstance(batch, _Failure):
            batch.raise_it()
        yield batch
