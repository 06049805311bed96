"""The members' copies of one split held on the device as one tensor: every member's batch by one index.

Stacked ensembles train small models on small data sets (the study's red-green tasks), so each
member's split is read whole once, at the model's image size, and the members' images are
concatenated. A step then gathers the batch of every member with one indexing operation (a member's
local indices plus its offset) and normalises all of them with one more, each with its own data set's
mean and standard deviation.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch

from ..data.dataset import ImageDataset
from .stack_metrics import MemberTasks

__all__ = ["MemberSplits"]


class MemberSplits:
    """Member i's split ``datasets[i]`` as rows ``offsets[i]:offsets[i] + len(datasets[i])`` of one tensor (held
    once where members share one split object)."""

    def __init__(
        self, datasets: Sequence[ImageDataset], tasks: MemberTasks, device: torch.device, rows: int | None = None
    ) -> None:
        """``rows`` (at least the member count) gives the padding rows of a padded stack the first member's data."""
        held = {id(d): d for d in datasets}  # members that share a split (a run and its longer twin) share rows
        wholes = [d.whole() for d in held.values()]
        self.images = torch.cat([x for x, _ in wholes]).to(device)  # sum N, C, H, W (uint8 as stored)
        self.targets = tasks.joined([y for _, y in wholes]).to(device)  # sum N, width
        starts = dict(zip(held, accumulate((len(d) for d in held.values()), initial=0), strict=False))
        pad = [0] * ((rows or len(datasets)) - len(datasets))
        self.offsets = torch.tensor([starts[id(d)] for d in datasets] + pad, device=device)
        infos = [d.info for d in datasets]
        infos += [infos[0]] * len(pad)
        self.scale = 1.0 / 255.0 if self.images.dtype == torch.uint8 else 1.0
        # as transforms.normalize computes its per-channel gain and shift, per member: the gain with the
        # uint8 scale inside (training, as Augment) or of images already in [0, 1] (evaluation)
        self.gains = {
            within: torch.tensor([[(self.scale if within else 1.0) / s for s in i.std] for i in infos], device=device)
            for within in (True, False)
        }
        self.shift = torch.tensor([[-m / s for m, s in zip(i.mean, i.std, strict=True)] for i in infos], device=device)

    def global_index(self, index: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Local indices (S, ...) of the members ``members`` (default: the first S) as rows of :attr:`images`."""
        offsets = self.offsets[: len(index)] if members is None else self.offsets[members]
        return index.to(self.offsets.device) + offsets.view(-1, *([1] * (index.ndim - 1)))

    def batch(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The images (S, B, C, H, W, as stored) and targets (S, B, width) at global ``rows`` (S, B)."""
        return self.images[rows], self.targets[rows]

    def normalized(
        self, images: torch.Tensor, *, scaled_first: bool = False, members: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(x - mean) / std of the images (S, B, C, H, W) of the members ``members`` (default: the first S) as a
        new float tensor: uint8 scaled within the gain, as :class:`~vitpos.data.transforms.Augment` does; with
        ``scaled_first`` to [0, 1] first, as evaluation does (``normalize(to_float(x))``)."""
        out = images.float()
        if scaled_first and self.scale != 1.0:
            out.div_(255.0)
        shape = (len(images), 1, -1, 1, 1)
        pick = slice(len(images)) if members is None else members
        gain, shift = self.gains[not scaled_first][pick], self.shift[pick]
        return torch.addcmul(shift.view(shape), out, gain.view(shape), out=out)
