"""Which samples each process trains on, batch by batch: plain shuffling or repeated augmentation.

Repeated augmentation (Hoffer et al. 2020; DeiT's ``RASampler``): the epoch's permutation has
each image ``repeats`` times in a row, and the processes take it in turns (process ``r`` takes
positions ``r, r + world, ...``), so the copies of an image go to different processes and are
augmented differently. The epoch keeps the length of one pass over the data (whole global
batches), so it shows ``1 / repeats`` of the images, each ``repeats`` times. The order depends
only on (seed, epoch), so a resumed run replays it; each position in the epoch also names the
seed of its sample's per-image augmentation.
"""

from __future__ import annotations

import torch

from .distributed import Dist, steps_per_epoch

__all__ = ["repeated_order", "rank_batches"]


def repeated_order(n: int, length: int, repeats: int, seed: int, epoch: int) -> torch.Tensor:
    """The first ``length`` entries of a shuffled ``range(n)`` with every index repeated ``repeats`` times in a row."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return order.repeat_interleave(repeats)[:length]


def rank_batches(
    n: int, global_batch: int, seed: int, epoch: int, ctx: Dist, repeats: int = 1
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This process's batches of one epoch as (sample indices, positions in the epoch's order).

    Global batch ``t`` is positions ``t * global_batch ...`` of the order, whichever the number of
    processes; process ``r`` takes every ``world``-th of them, starting at ``r``.
    """
    steps = steps_per_epoch(n, global_batch, ctx)
    order = repeated_order(n, steps * global_batch, repeats, seed, epoch)
    positions = torch.arange(ctx.rank, steps * global_batch, ctx.world_size)
    local = global_batch // ctx.world_size
    return [(order[p], p) for p in positions.split(local)]
