"""CIFAR-10 / CIFAR-100 in their python batch format, read with a restricted unpickler.

A batch file is a pickled dict of numpy arrays, lists, numbers and strings. ``pickle.load``
would run any callable a tampered file names; :class:`BatchUnpickler` resolves only the few
numpy globals that rebuild an array, so a file carrying anything else is refused unopened.
CIFAR has no validation split: ``val`` is the test batch.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .dataset import DataInfo, DataSplits, TensorImages

__all__ = ["BatchUnpickler", "ForbiddenGlobal", "read_batch", "load_cifar_splits", "CifarLayout", "CIFAR_LAYOUT"]

_ALLOWED_GLOBALS = {
    # numpy's array pickling, under the numpy 1.x and 2.x module names
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    # python 3 writes bytes as _codecs.encode(str, 'latin1') under pickle protocol 2
    ("_codecs", "encode"),
}


@dataclass(frozen=True)
class CifarLayout:
    """Where one CIFAR variant keeps its batches, labels and class names, and its channel statistics."""

    folder: str
    """The folder the archive extracts to."""
    train: tuple[str, ...]
    test: tuple[str, ...]
    meta: tuple[str, str]
    """(file, key) of the class names."""
    labels: str
    """The key of the labels in a batch."""
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


CIFAR_LAYOUT = {
    "cifar10": CifarLayout(
        folder="cifar-10-batches-py",
        train=tuple(f"data_batch_{i}" for i in range(1, 6)),
        test=("test_batch",),
        meta=("batches.meta", "label_names"),
        labels="labels",
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
    ),
    "cifar100": CifarLayout(
        folder="cifar-100-python",
        train=("train",),
        test=("test",),
        meta=("meta", "fine_label_names"),
        labels="fine_labels",
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
    ),
}


class ForbiddenGlobal(pickle.UnpicklingError):
    """A pickle refers to something other than the numpy globals a CIFAR batch needs."""


class BatchUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays and plain containers and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise ForbiddenGlobal(f"it refers to {module}.{name}")


def read_batch(path: Path) -> dict[str, Any]:
    """Load one batch file safely; keys come back as str."""
    try:
        data = BatchUnpickler(io.BytesIO(path.read_bytes()), encoding="latin1").load()
    except ForbiddenGlobal as err:
        raise ValueError(
            f"refusing to load CIFAR batch {path}: {err}, which a CIFAR batch never holds "
            "(only numpy arrays, lists, numbers and strings); the file is not a genuine CIFAR batch"
        ) from None
    except Exception as err:  # truncated or garbled: EOFError, ValueError, ...
        raise ValueError(f"CIFAR batch {path} is corrupt or truncated ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"CIFAR batch {path} holds a {type(data).__name__}, not a dict")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in data.items()}


def _load_split(folder: Path, files: tuple[str, ...], label_key: str) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = [], []
    for name in files:
        batch = read_batch(folder / name)
        missing = [k for k in ("data", label_key) if k not in batch]
        if missing:
            raise ValueError(f"CIFAR batch {folder / name} lacks the key(s) {', '.join(missing)}")
        data = np.asarray(batch["data"])
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(
                f"CIFAR batch {folder / name}: 'data' must be uint8 (N, 3072), got {data.dtype} {data.shape}"
            )
        if len(batch[label_key]) != len(data):
            raise ValueError(f"CIFAR batch {folder / name}: {len(data)} images but {len(batch[label_key])} labels")
        images.append(torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()))
        labels.append(torch.as_tensor(np.asarray(batch[label_key], dtype=np.int64)))
    return torch.cat(images), torch.cat(labels)


def load_cifar_splits(kind: str, path: str | Path) -> DataSplits:
    """CIFAR-10 or -100 from ``path``: the extracted batch folder or the folder that holds it."""
    layout = CIFAR_LAYOUT[kind]
    root = Path(path).expanduser()
    folder = root / layout.folder if (root / layout.folder).is_dir() else root
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{kind} data folder {root} does not exist; download and extract the python version there"
        )
    needed = [*layout.train, *layout.test, layout.meta[0]]
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{folder} is not a {kind} python batch folder: missing {', '.join(missing)} "
            f"(expected the contents of {layout.folder})"
        )
    meta_file, names_key = layout.meta
    names = read_batch(folder / meta_file).get(names_key)
    if not names:
        raise ValueError(f"{folder / meta_file} lacks the class names under {names_key!r}")
    info = DataInfo(
        f"{kind}:{path}",
        "classification",
        classes=tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names),
        mean=layout.mean,
        photographic=True,
        std=layout.std,
    )
    splits = {}
    for split, files in (("train", layout.train), ("test", layout.test)):
        images, labels = _load_split(folder, files, layout.labels)
        if labels.numel() and (labels.min() < 0 or labels.max() >= len(info.classes)):
            raise ValueError(f"{kind} {split} labels fall outside 0..{len(info.classes) - 1}")
        splits[split] = TensorImages(images, labels, info)
    return DataSplits(splits["train"], splits["test"], splits["test"])
