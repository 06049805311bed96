"""CIFAR python batches: the real format, read safely; a tampered batch is refused."""

import os
import pickle

import numpy as np
import pytest
import torch

from vitpos.data import open_data
from vitpos.data.cifar import CIFAR_LAYOUT, read_batch


def write_batch(path, payload, protocol=2):
    with open(path, "wb") as f:
        pickle.dump(payload, f, protocol=protocol)


def make_cifar(root, kind="cifar10", per_file=6, num_classes=10):
    """A miniature data set in the layout and pickle format of the official python version."""
    layout = CIFAR_LAYOUT[kind]
    folder = root / layout.folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i, name in enumerate(layout.train + layout.test):
        data = rng.integers(0, 256, (per_file, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, num_classes, per_file)]
        batch = {
            b"batch_label": b"batch %d" % i,
            layout.labels.encode(): labels,
            b"data": data,
            b"filenames": [b"img_%d.png" % j for j in range(per_file)],
        }
        if kind == "cifar100":
            batch[b"coarse_labels"] = [0] * per_file
        write_batch(folder / name, batch)
    meta_file, key = layout.meta
    write_batch(folder / meta_file, {key.encode(): [b"class_%d" % c for c in range(num_classes)]})
    return folder


def test_cifar10_loads_in_the_official_layout(tmp_path):
    folder = make_cifar(tmp_path)
    splits = open_data(f"cifar10:{tmp_path}")  # the parent of cifar-10-batches-py works too
    assert len(splits.train) == 30 and len(splits.test) == 6 and splits.val is splits.test
    assert splits.info.classes[:2] == ("class_0", "class_1") and splits.info.photographic
    raw = read_batch(folder / "data_batch_1")
    images, labels = splits.train[torch.arange(6)]
    assert images.shape == (6, 3, 32, 32) and images.dtype == torch.uint8
    # rows hold the red plane, then green, then blue, each row-major
    assert images[2, 1, 3, 5] == raw["data"][2, 1024 + 3 * 32 + 5]
    assert labels.tolist() == raw["labels"]


def test_cifar100_fine_labels(tmp_path):
    make_cifar(tmp_path, "cifar100", num_classes=100)
    splits = open_data(f"cifar100:{tmp_path / 'cifar-100-python'}")
    assert len(splits.info.classes) == 100 and len(splits.train) == 6


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_batch_carrying_a_callable_is_refused_unrun(tmp_path):
    folder = make_cifar(tmp_path)
    marker = tmp_path / "pwned"
    write_batch(folder / "data_batch_3", {b"data": np.zeros((1, 3072), np.uint8), b"labels": [Exploit(marker)]})
    with pytest.raises(
        ValueError, match=r"refusing to load CIFAR batch .*data_batch_3: it refers to (posix|os)\.system"
    ):
        open_data(f"cifar10:{tmp_path}")
    assert not marker.exists()


def test_truncated_and_malformed_batches(tmp_path):
    folder = make_cifar(tmp_path)
    whole = (folder / "test_batch").read_bytes()
    (folder / "test_batch").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="test_batch is corrupt or truncated"):
        open_data(f"cifar10:{tmp_path}")
    write_batch(folder / "test_batch", {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
    with pytest.raises(ValueError, match=r"'data' must be uint8 \(N, 3072\)"):
        open_data(f"cifar10:{tmp_path}")


def test_missing_folder_or_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_data(f"cifar10:{tmp_path / 'nowhere'}")
    folder = make_cifar(tmp_path)
    (folder / "data_batch_5").unlink()
    with pytest.raises(FileNotFoundError, match="missing data_batch_5"):
        open_data(f"cifar10:{tmp_path}")
