"""scikit-learn's bundled handwritten digits (1,797 grey 8x8 images): a tiny real data set, no download."""

from __future__ import annotations

import numpy as np
import torch

from .dataset import DataInfo, DataSplits, TensorImages

__all__ = ["load_digits_splits"]


def load_digits_splits(seed: int = 0, val_fraction: float = 0.15, test_fraction: float = 0.15) -> DataSplits:
    """A seeded, stratification-free random split of the digits into train / val / test."""
    from sklearn.datasets import load_digits  # imported here: scikit-learn is slow to import

    bunch = load_digits()
    # pixel values are 0..16; stretch them to the uint8 range every source shares
    images = torch.from_numpy(np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8))[:, None]
    targets = torch.from_numpy(bunch.target.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(images)))
    n_val, n_test = round(len(images) * val_fraction), round(len(images) * test_fraction)
    parts = {"val": order[:n_val], "test": order[n_val : n_val + n_test], "train": order[n_val + n_test :]}
    train_pixels = images[parts["train"]].float() / 255.0
    info = DataInfo(
        "digits" if seed == 0 else f"digits:seed={seed}",
        "classification",
        classes=tuple(str(d) for d in range(10)),
        channels=1,
        mean=(float(train_pixels.mean()),),
        std=(float(train_pixels.std()),),
    )
    split = {name: TensorImages(images[idx], targets[idx], info) for name, idx in parts.items()}
    return DataSplits(split["train"], split["val"], split["test"])
