"""The training data as the trainer consumes it: per-image work in the loading workers, per-batch work on the device.

Sources that hand out single images (image folders, CIFAR, digits: ``ImageDataset.per_image``)
are cropped and flipped image by image from the *whole* image in the workers
(:class:`~vitpos.data.crops.TrainCrop`); RandAugment, normalisation, random erasing and
mixup / cutmix then run batched on the training device (:class:`~vitpos.data.transforms.Augment`),
the next batch's while the current one trains (:class:`~.prefetch.DeviceBatches`).
WebDataset shards are streamed (:class:`~vitpos.data.shard_stream.ShardStream`).
Sources that draw whole batches (the synthetic tasks, dense tasks) keep the batched path at the
model size; dense tasks' images keep their own sizes, padded per batch to a multiple of the model's
stride (:mod:`~vitpos.data.padded`). Evaluation of photographs from files uses ``eval_crop``
(:class:`~vitpos.data.crops.EvalCrop`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import torch

from ..data.crops import TrainCrop
from ..data.dataset import DataInfo, DataSplits, ImageDataset, Size, iterate_batches
from ..data.folders import ImageFiles
from ..data.loader import worker_batches
from ..data.padded import fit_split
from ..data.shard_stream import ShardStream
from ..data.shards import ShardImages
from ..data.transforms import Augment
from ..data.views import AugmentedViews
from .config import TrainConfig
from .distributed import Dist, epoch_batches, steps_per_epoch
from .prefetch import DeviceBatches
from .sampling import rank_batches

__all__ = ["build_augment", "TrainData", "eval_split", "for_evaluation"]


def build_augment(cfg: TrainConfig, info: DataInfo) -> Augment:
    """The training augmentation for ``info``; refuses ones that would falsify its labels."""
    if info.position_sensitive:
        moving = [n for n in ("crop_scale", "hflip", "cutmix", "randaugment", "random_erasing") if getattr(cfg, n)]
        if moving:
            raise ValueError(
                f"{', '.join(moving)} move or hide things within the image and would change the labels of "
                f"{info.spec}; leave them off for synthetic tasks"
            )
    if info.task != "classification" and (cfg.mixup or cfg.cutmix or cfg.label_smoothing):
        raise ValueError(f"mixup, cutmix and label_smoothing need a classification task; {info.spec} is {info.task}")
    default_on = info.photographic
    randaugment = None
    if cfg.randaugment:
        from ..data.randaugment import RandAugment  # kornia: imported only when asked for (0.7 s)

        randaugment = RandAugment.from_spec(cfg.randaugment, info.mean)
    return Augment(
        info.mean,
        info.std,
        num_classes=info.num_outputs if info.task == "classification" else 0,
        crop_scale=cfg.crop_scale if cfg.crop_scale is not None else (0.08 if default_on else None),
        hflip=cfg.hflip if cfg.hflip is not None else (0.5 if default_on else 0.0),
        mixup_alpha=cfg.mixup,
        cutmix_alpha=cfg.cutmix,
        label_smoothing=cfg.label_smoothing,
        randaugment=randaugment,
        erasing=cfg.random_erasing,
        mixup_switch=cfg.mixup_switch,
    )


def for_evaluation(split: ImageDataset, eval_crop: float, interpolation: str) -> ImageDataset:
    """``split`` evaluated with ``eval_crop`` where it reads photographs from files (folders, shards); others as is."""
    return split.evaluated_with(eval_crop, interpolation) if isinstance(split, (ImageFiles, ShardImages)) else split


def eval_split(data: DataSplits, name: str, size: Size, cfg: TrainConfig, stride: int = 1) -> ImageDataset:
    """Split ``name`` at ``size`` for evaluation, with the run's crop fraction and resampling; padded
    batches pad to a multiple of ``stride`` (the model's)."""
    return for_evaluation(fit_split(data.split(name), size, stride), cfg.eval_crop, cfg.interpolation)


class TrainData:
    """The training split of a run: its steps per epoch, the device-side augmentation, and each epoch's batches."""

    def __init__(
        self, data: DataSplits, cfg: TrainConfig, size: Size, ctx: Dist, pin_memory: bool = False, stride: int = 1
    ) -> None:
        self.cfg, self.ctx, self.pin_memory = cfg, ctx, pin_memory
        augment = build_augment(cfg, data.info)
        split = data.train
        if cfg.repeated_aug > 1 and not split.per_image:
            raise ValueError(
                f"repeated_aug needs a data set of single images (folder:, cifar10:, cifar100:, digits); "
                f"{data.info.spec} draws whole batches: set repeated_aug 1"
            )
        self.crop: TrainCrop | None = None
        if split.per_image:
            self.crop = TrainCrop(
                size,
                "L" if data.info.channels == 1 else "RGB",
                scale=None if augment.crop_scale is None else (augment.crop_scale, 1.0),
                hflip=augment.hflip,
                interpolation=cfg.interpolation,
            )
            augment = dataclasses.replace(augment, crop_scale=None, hflip=0.0)  # done per image
        else:
            split = fit_split(split, size, stride)
        self.split, self.augment = split, augment
        self.steps_per_epoch = steps_per_epoch(len(split), cfg.batch_size, ctx)

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """This process's (uint8 images, targets) batches of ``epoch`` from batch ``start`` on."""
        cfg, pin = self.cfg, self.pin_memory
        if self.crop is None:
            plain = epoch_batches(len(self.split), cfg.batch_size, cfg.seed, epoch, self.ctx)
            return iterate_batches(self.split, plain[start:], cfg.workers, pin_memory=pin)
        if isinstance(self.split, ShardImages):
            stream = ShardStream(
                self.split,
                self.crop,
                seed=cfg.seed,
                epoch=epoch,
                rank=self.ctx.rank,
                world=self.ctx.world_size,
                local_batch=cfg.batch_size // self.ctx.world_size,
                steps=self.steps_per_epoch,
                start=start,
                buffer=cfg.shuffle_buffer,
                repeats=cfg.repeated_aug,
            )
            return worker_batches(stream, cfg.workers, pin_memory=pin)
        keys = rank_batches(len(self.split), cfg.batch_size, cfg.seed, epoch, self.ctx, cfg.repeated_aug)
        views = AugmentedViews(self.split, self.crop, cfg.seed, epoch)
        return iterate_batches(views, keys[start:], cfg.workers, pin_memory=pin)

    def device_batches(
        self,
        epoch: int,
        start: int,
        device: torch.device,
        seed_of: Callable[[int], int],
        report: Callable[[str], None] | None = None,
    ) -> DeviceBatches:
        """:meth:`batches` augmented on ``device`` (:class:`~.prefetch.DeviceBatches`), the next one
        prepared while the current one trains; ``seed_of(k)`` seeds the augmentation of the k-th."""
        n = self.cfg.workers
        source = f"{n} loading worker{'s' if n > 1 else ''}" if n else "the main process (--workers 0)"
        return DeviceBatches(self.batches(epoch, start), self.augment, device, seed_of, report, source)
