"""Data-parallel runs under ``torchrun``: process group, device, sharded batches, reductions.

The same code runs in one process (no process group) or in many: ``torchrun`` sets RANK,
WORLD_SIZE and LOCAL_RANK, and :func:`setup` joins the group (NCCL on GPU, gloo on CPU).
Batch order depends only on the seed and the epoch, never on the number of processes: step
``t`` of an epoch uses the same global batch everywhere, and rank ``r`` takes its
``r``-th equal slice of it. One global batch size therefore gives the same run on 1 or N
processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..errors import ConfigError
from ..validation import check_value
from .config import DEVICES

__all__ = [
    "Dist",
    "setup",
    "teardown",
    "pick_device",
    "steps_per_epoch",
    "epoch_batches",
    "epoch_order",
    "eval_batches",
    "all_reduce_sum",
]


@dataclass(frozen=True)
class Dist:
    """This process's place in the run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes logs and checkpoints."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """More than one process."""
        return self.world_size > 1

    def barrier(self) -> None:
        """Wait for every process (no-op in a single process)."""
        if self.enabled:
            dist.barrier()

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over every process (in place; returned for convenience)."""
        return all_reduce_sum(tensor, self)

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's ``items`` (picklable), concatenated in rank order."""
        if not self.enabled:
            return list(items)
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, items)
        return [item for part in gathered for item in part]


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> this process's GPU if there is one, else CPU; ``cuda`` -> this process's GPU."""
    check_value("device", name, str, DEVICES)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for, but CUDA is not available here; use --device cpu")
    return device


def setup(device_name: str) -> tuple[Dist, torch.device]:
    """Join the process group when launched by torchrun; returns the rank info and the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist(), pick_device(device_name)
    ctx = Dist(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    device = pick_device(device_name, ctx.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return ctx, device


def teardown(wait_for_peers: bool = True) -> None:
    """Leave the process group, if any.

    With ``wait_for_peers`` (a run that ended normally) every process first reaches a barrier:
    a rank that destroys its gloo group while a peer still uses the group's connections can
    abort ("terminate called without an active exception"). After an error there is no
    barrier, since the peers may never reach it.
    """
    if dist.is_available() and dist.is_initialized():
        if wait_for_peers:
            dist.barrier()
        dist.destroy_process_group()


def steps_per_epoch(n: int, global_batch: int, ctx: Dist) -> int:
    """Full global batches in ``n`` samples; raises if there are none or they do not split over the ranks."""
    if global_batch % ctx.world_size:
        raise ValueError(f"batch_size {global_batch} does not split evenly over {ctx.world_size} processes")
    if n < global_batch:
        raise ValueError(f"batch_size {global_batch} is larger than the training split ({n} samples); lower it")
    return n // global_batch


def epoch_batches(n: int, global_batch: int, seed: int, epoch: int, ctx: Dist) -> list[torch.Tensor]:
    """This rank's index batches for one training epoch (shuffled; the last partial batch dropped)."""
    return list(epoch_order(n, global_batch, seed, epoch, ctx))


def epoch_order(n: int, global_batch: int, seed: int, epoch: int, ctx: Dist) -> torch.Tensor:
    """:func:`epoch_batches` as one (steps, local batch) tensor, a view of the epoch's shuffled order."""
    steps = steps_per_epoch(n, global_batch, ctx)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    local = global_batch // ctx.world_size
    start = ctx.rank * local
    return order[: steps * global_batch].view(steps, global_batch)[:, start : start + local]


def eval_batches(n: int, batch_size: int, ctx: Dist) -> list[torch.Tensor]:
    """This rank's strided share of ``range(n)`` in batches; every sample is seen exactly once."""
    mine = torch.arange(ctx.rank, n, ctx.world_size)
    return list(mine.split(batch_size))


def all_reduce_sum(tensor: torch.Tensor, ctx: Dist) -> torch.Tensor:
    """Sum ``tensor`` over all processes (in place; returned for convenience)."""
    if ctx.enabled:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
