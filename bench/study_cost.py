"""``python -m bench.study_cost [--full]``: a study's training cost, extrapolated from measured steps.

Measures the CPU time of one training step (forward, backward, AdamW) of every family's model at
the protocol's image size and batch, with one thread, and multiplies it by the optimiser steps the
protocol trains (every distinct training of :meth:`StudyConfig.cells`, pretraining included).
Evaluation, probes and start-up are not included: the figure is a lower bound of the CPU time.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from vitpos import create_model
from vitpos.config import HostConfig
from vitpos.study.execute import training_key
from vitpos.study.protocol import StudyConfig


def step_seconds(model_cfg: HostConfig, batch: int, steps: int = 20) -> float:
    """CPU seconds per training step of ``model_cfg`` at batch ``batch``: the mean of ``steps``
    after three warm-up steps."""
    model = create_model(model_cfg).train()
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(batch, model_cfg.in_chans, *model_cfg.image_hw)
    y = torch.randint(0, model_cfg.num_classes, (batch,))
    for i in range(steps + 3):
        if i == 3:
            start = time.process_time()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return (time.process_time() - start) / steps


def training_steps(config: StudyConfig) -> dict[str, int]:
    """Optimiser steps per family: every distinct training of the protocol (twins counted once)."""
    out: dict[str, int] = {}
    seen = set()
    for cell in config.cells():
        key = training_key(cell)
        if key in seen:
            continue
        seen.add(key)
        out[cell.family] = out.get(cell.family, 0) + config.epochs_for(cell.train_size) * (
            cell.train_size // config.batch_size
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.study_cost", description=__doc__)
    p.add_argument("--full", action="store_true", help="the thesis protocol (default: the default study)")
    p.add_argument("--cores", type=int, default=2, help="cores the estimate divides the CPU time over")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    config = StudyConfig.full() if args.full else StudyConfig()
    steps = training_steps(config)
    pretrain_steps = 2 * config.pretrain_epochs * (config.pretrain_size // config.batch_size)
    total = 0.0
    print("| family | CPU ms per step | steps | CPU minutes |")
    print("| --- | ---: | ---: | ---: |")
    for family in config.families:
        cost = step_seconds(config.model.replace(**family.model_overrides, num_classes=2), config.batch_size)
        n = steps[family.label] + (pretrain_steps if family.pretrained else 0)
        total += cost * n
        print(f"| {family.label} | {1000 * cost:.1f} | {n:,} | {cost * n / 60:.1f} |", flush=True)
    print(
        f"\n{'--full' if args.full else 'default'}: {sum(steps.values()) + pretrain_steps:,} training steps, "
        f"{total / 60:.1f} CPU minutes of training alone: {total / 60 / args.cores:.1f} min on {args.cores} cores"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
