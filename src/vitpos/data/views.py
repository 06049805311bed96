"""Training batches built image by image in the data-loading workers: open, crop, flip, stack.

The key of a batch is (sample indices, positions in the epoch's order); the random crop of the
sample at position ``p`` of epoch ``e`` draws from a generator seeded by (seed, e, p) alone, so a
batch is the same in any worker, on any process, and again when a run is resumed.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from .crops import TrainCrop
from .dataset import ImageDataset

__all__ = ["AugmentedViews", "sample_rng"]


def sample_rng(seed: int, epoch: int, position: int) -> np.random.Generator:
    """The generator of the per-image augmentation at ``position`` of epoch ``epoch``."""
    return np.random.default_rng([seed, epoch, position])


class AugmentedViews(Dataset):
    """``views[(indices, positions)] -> (uint8 images, targets)``: one random view of each sample of ``split``."""

    def __init__(self, split: ImageDataset, crop: TrainCrop, seed: int, epoch: int) -> None:
        if not split.per_image:
            raise TypeError(f"{type(split).__name__} hands out whole batches only, not single images")
        self.split, self.crop, self.seed, self.epoch = split, crop, seed, epoch

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, key: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        images, targets = [], []
        for index, position in zip(key[0].tolist(), key[1].tolist(), strict=True):
            img, target = self.split.open_sample(index)
            with img:
                images.append(self.crop(img, sample_rng(self.seed, self.epoch, position)))
            targets.append(target)
        return torch.stack(images), torch.stack(targets)
