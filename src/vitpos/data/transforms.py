"""Batch transforms in plain torch, run on the training device: resize, random resized crop,
horizontal flip, RandAugment (:mod:`.randaugment`), normalisation, random erasing, mixup / cutmix
and label smoothing.

Each random transform draws a separate value per sample from torch's global generator, which
the trainer reseeds every step, so a resumed run sees the same augmentations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "to_float",
    "resize",
    "normalize",
    "random_resized_crop",
    "random_hflip",
    "mixup_",
    "cutmix_",
    "random_erasing_",
    "smooth_one_hot",
    "soft_cross_entropy",
    "Augment",
]


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 images in [0, 255] -> float32 in [0, 1]."""
    return images.float().div_(255.0) if images.dtype == torch.uint8 else images.float()


def resize(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize of a batch (antialiased when shrinking); uint8 stays uint8."""
    size = (int(size[0]), int(size[1]))
    if tuple(images.shape[-2:]) == size:
        return images
    shrink = size[0] < images.shape[-2] or size[1] < images.shape[-1]
    out = F.interpolate(to_float(images), size=size, mode="bilinear", align_corners=False, antialias=shrink)
    if images.dtype == torch.uint8:
        return out.mul_(255.0).round_().clamp_(0, 255).to(torch.uint8)
    return out


def normalize(images: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """(x - mean) / std per channel, as a new float tensor; uint8 images are scaled to [0, 1] in the same step."""
    scale = 1.0 / 255.0 if images.dtype == torch.uint8 else 1.0
    out = images.float() if images.dtype == torch.uint8 else images.clone()
    gain = torch.tensor([scale / s for s in std], device=images.device, dtype=out.dtype).view(1, -1, 1, 1)
    shift = torch.tensor([-m / s for m, s in zip(mean, std, strict=True)], device=images.device, dtype=out.dtype)
    return torch.addcmul(shift.view(1, -1, 1, 1), out, gain, out=out)


def random_resized_crop(
    images: torch.Tensor,
    size: tuple[int, int],
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> torch.Tensor:
    """Crop a random area fraction in ``scale`` with aspect ratio in ``ratio``, resize to ``size``.

    One crop per sample, sampled bilinearly through an affine grid. A crop too wide or tall
    for the image is clamped to it (torchvision instead retries ten times, then centre-crops).
    """
    b = images.shape[0]
    dev = images.device
    area = torch.empty(b, device=dev).uniform_(*scale)
    log_ratio = torch.empty(b, device=dev).uniform_(math.log(ratio[0]), math.log(ratio[1]))
    aspect = log_ratio.exp() * images.shape[-2] / images.shape[-1]  # pixel aspect -> aspect of fractions
    width = (area * aspect).sqrt().clamp(max=1.0)  # fractions of the image width / height
    height = (area / aspect).sqrt().clamp(max=1.0)
    cx = width / 2 + torch.rand(b, device=dev) * (1 - width)
    cy = height / 2 + torch.rand(b, device=dev) * (1 - height)
    theta = torch.zeros(b, 2, 3, device=dev)
    theta[:, 0, 0], theta[:, 0, 2] = width, 2 * cx - 1
    theta[:, 1, 1], theta[:, 1, 2] = height, 2 * cy - 1
    grid = F.affine_grid(theta, [b, images.shape[1], *size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


def random_hflip(images: torch.Tensor, p: float = 0.5) -> torch.Tensor:
    """Mirror each image left-right with probability ``p``."""
    flip = torch.rand(images.shape[0], device=images.device) < p
    return torch.where(flip.view(-1, 1, 1, 1), images.flip(-1), images)


def smooth_one_hot(labels: torch.Tensor, num_classes: int, smoothing: float = 0.0) -> torch.Tensor:
    """One-hot targets with ``smoothing`` spread uniformly over all classes (Szegedy et al. 2016)."""
    off = smoothing / num_classes
    out = torch.full((labels.shape[0], num_classes), off, device=labels.device)
    return out.scatter_(1, labels.view(-1, 1), 1.0 - smoothing + off)


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy against probability targets."""
    return -(targets * logits.float().log_softmax(dim=-1)).sum(dim=-1).mean()


def mixup_(images: torch.Tensor, targets: torch.Tensor, alpha: float) -> float:
    """In place: blend each sample with its mirror in the batch, lam * x + (1 - lam) * x[::-1] (Zhang et al.
    2018), and the targets alike; returns lam."""
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    half = images.shape[0] // 2  # a middle sample of an odd batch is its own mirror
    first, last = images[:half], images[images.shape[0] - half :]
    first_mirror, last_mirror = last.flip(0), first.flip(0)  # copies of half the batch each
    first.lerp_(first_mirror, 1.0 - lam)
    last.lerp_(last_mirror, 1.0 - lam)
    targets.lerp_(targets.flip(0), 1.0 - lam)
    return lam


def cutmix_(images: torch.Tensor, targets: torch.Tensor, alpha: float) -> float:
    """In place: paste a box from each sample's mirror in the batch; targets mix by pasted area (Yun et al.
    2019); returns the weight lam of each sample's own target."""
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    h, w = images.shape[-2:]
    cut = math.sqrt(1.0 - lam)
    ch, cw = int(h * cut), int(w * cut)
    cy, cx = int(torch.randint(h, ())), int(torch.randint(w, ()))
    y0, y1 = max(cy - ch // 2, 0), min(cy + ch - ch // 2, h)
    x0, x1 = max(cx - cw // 2, 0), min(cx + cw - cw // 2, w)
    box = images[..., y0:y1, x0:x1]
    box.copy_(box.flip(0))  # flip copies the boxes before any is overwritten
    lam = 1.0 - (y1 - y0) * (x1 - x0) / (h * w)  # the box may have been clipped at the border
    targets.lerp_(targets.flip(0), 1.0 - lam)
    return lam


def random_erasing_(
    images: torch.Tensor,
    p: float,
    area: tuple[float, float] = (0.02, 1 / 3),
    ratio: tuple[float, float] = (0.3, 1 / 0.3),
    attempts: int = 10,
) -> torch.Tensor:
    """In place: erase one box per image with probability ``p``, filled with per-pixel normal noise (Zhong et
    al. 2020); returns ``images``.

    timm's ``RandomErasing(mode="pixel")`` as DeiT uses it on normalised images: up to ``attempts``
    draws of an area fraction in ``area`` and a log-uniform aspect in ``ratio``; the first box that
    fits strictly inside the image is erased, and none if none fits. Noise is drawn only for the
    erased pixels.
    """
    b, _, h, w = images.shape
    dev = images.device
    frac = torch.empty(b, attempts, device=dev).uniform_(*area)
    aspect = torch.empty(b, attempts, device=dev).uniform_(math.log(ratio[0]), math.log(ratio[1])).exp()
    bh, bw = (frac * h * w * aspect).sqrt().round(), (frac * h * w / aspect).sqrt().round()
    fits = (bh < h) & (bw < w)
    first = fits.float().argmax(dim=1, keepdim=True)  # the first attempt that fits
    bh, bw = bh.gather(1, first).squeeze(1), bw.gather(1, first).squeeze(1)
    erase = fits.any(dim=1) & (torch.rand(b, device=dev) < p)
    top = (torch.rand(b, device=dev) * (h - bh + 1)).floor()
    left = (torch.rand(b, device=dev) * (w - bw + 1)).floor()
    rows = erase.nonzero().squeeze(1)
    if not rows.numel():
        return images
    top, left, bh, bw = (v[rows].view(-1, 1, 1) for v in (top, left, bh, bw))
    ys, xs = torch.arange(h, device=dev).view(1, h, 1), torch.arange(w, device=dev).view(1, 1, w)
    inside = (ys >= top) & (ys < top + bh) & (xs >= left) & (xs < left + bw)  # k, H, W
    which, y, x = inside.nonzero(as_tuple=True)
    images[rows[which], :, y, x] = torch.randn(len(which), images.shape[1], device=dev, dtype=images.dtype)
    return images


@dataclass
class Augment:
    """The training-time pipeline: crop, flip, RandAugment, normalise, erase, then mixup or cutmix with soft targets.

    Called with uint8 images on the device and hard labels (or regression targets); returns
    float images and either the targets unchanged or soft class targets when mixing or
    smoothing labels. Runs without autograd; images stay uint8 until normalised, and erasing and
    mixing then work in place on the normalised copy.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    num_classes: int = 0
    """Classes of a classification task; 0 for regression (no label transforms)."""
    crop_scale: float | None = None
    """Smallest area fraction of the random resized crop; None leaves images uncropped."""
    hflip: float = 0.0
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    label_smoothing: float = 0.0
    randaugment: Callable[[torch.Tensor], torch.Tensor] | None = None
    """RandAugment on uint8 images (or floats in [0, 1]) (:class:`~.randaugment.RandAugment`)."""
    erasing: float = 0.0
    """Random-erasing probability per image."""
    mixup_switch: float = 0.5
    """With mixup and cutmix both on: the probability of cutmix for a batch."""

    @property
    def mixes(self) -> bool:
        """Whether targets come out soft (mixup or cutmix on)."""
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    @property
    def draws(self) -> bool:
        """Whether it draws random numbers (else it only normalises: the same for every call)."""
        moves = self.crop_scale is not None or self.hflip > 0 or self.randaugment is not None
        return moves or self.erasing > 0 or self.mixes

    @torch.no_grad()
    def __call__(self, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = images
        if self.crop_scale is not None:
            x = random_resized_crop(to_float(x), (x.shape[-2], x.shape[-1]), scale=(self.crop_scale, 1.0))
        if self.hflip > 0:
            x = random_hflip(x, self.hflip)
        if self.randaugment is not None:
            x = self.randaugment(x)  # uint8 stays uint8
        x = normalize(x, self.mean, self.std)  # a new float tensor: the steps below work in place
        if self.erasing > 0:
            random_erasing_(x, self.erasing)
        if not self.mixes:
            return x, targets
        soft = smooth_one_hot(targets, self.num_classes, self.label_smoothing)
        # with both on, pick one per batch (DeiT / timm: cutmix with probability 0.5)
        use_cutmix = self.cutmix_alpha > 0 and (self.mixup_alpha <= 0 or bool(torch.rand(()) < self.mixup_switch))
        cutmix_(x, soft, self.cutmix_alpha) if use_cutmix else mixup_(x, soft, self.mixup_alpha)
        return x, soft
