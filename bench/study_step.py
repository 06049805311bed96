"""``python -m bench.study_step``: the study's training step, before and after, timed in one process.

One training step (forward, cross-entropy, backward, gradient clipping, AdamW) of the study's model
(the one-block ``thesis_vit`` at 24 px with a family's slots) on one thread, in several variants:
``before`` is the single-model trainer's step the study used; the others are what the study could
use instead. Rounds run every variant once, in turn, so drift and other jobs on the machine hit them
alike; the table gives each variant's median time per image and its speed-up over ``before`` within
each round (median, min-max).
"""

from __future__ import annotations

import argparse
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from vitpos.config import HostConfig
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.engine.stacked_step import Stack, StackStep
from vitpos.models.factory import create_model
from vitpos.study.families import parse_family
from vitpos.study.protocol import study_model

from .ensemble_rate import at_constant_rate

Step = Callable[[], torch.Tensor]


def _optimised(params: list[torch.Tensor], loss_of: Callable[[], torch.Tensor]) -> Step:
    optimizer = torch.optim.AdamW(params, lr=1e-3)

    def step() -> torch.Tensor:
        loss = loss_of()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss.detach()

    return step


def model_step(model_cfg: HostConfig, batch: int, *, compiled: bool = False, bf16: bool = False) -> Step:
    """A step of one model called as a module (the single-model trainer's way)."""
    torch.manual_seed(0)
    model = create_model(model_cfg).train()
    net = torch.compile(model) if compiled else model
    x, y = torch.randn(batch, 3, *model_cfg.image_hw), torch.randint(0, 2, (batch,))

    def loss() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = net(x)
        return F.cross_entropy(out.float(), y)

    return _optimised(list(model.parameters()), loss)


def stack_step(model_cfg: HostConfig, batch: int, members: int = 1, device: str = "cpu") -> Step:
    """A step of ``members`` models stacked as the study's trainer steps them (:class:`StackStep`; one member:
    no vmap), with the optimiser settings of :func:`model_step` (AdamW at 1e-3, decay 0.01 on every tensor)."""
    models = []
    for seed in range(members):
        torch.manual_seed(seed)
        models.append(create_model(model_cfg).to(device).train())
    stack = Stack(models, first=list(dict(models[0].named_parameters())))
    x = torch.randn(members, batch, 3, *model_cfg.image_hw, device=device)
    y = torch.randint(0, 2, (members, batch, 1), device=device).float()
    tasks = MemberTasks([SyntheticTask("direction").info] * members, torch.device(device))
    step = StackStep(stack, tasks, weight_decay=0.01, betas=(0.9, 0.999), grad_clip=1.0)
    return lambda: at_constant_rate(step, x, y)[0].sum()


def variants(model_cfg: HostConfig, batch: int) -> dict[str, tuple[Step, int]]:
    """Name -> (step, images per step)."""
    return {
        "before: one model, eager": (model_step(model_cfg, batch), batch),
        "study now: stack of one, eager": (stack_step(model_cfg, batch), batch),
        "torch.compile": (model_step(model_cfg, batch, compiled=True), batch),
        "bf16 autocast, eager": (model_step(model_cfg, batch, bf16=True), batch),
        "bf16 autocast + torch.compile": (model_step(model_cfg, batch, compiled=True, bf16=True), batch),
        f"batch {4 * batch}": (model_step(model_cfg, 4 * batch), 4 * batch),
        "stacked ensemble of 5 (vmap)": (stack_step(model_cfg, batch, 5), 5 * batch),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.study_step", description=__doc__)
    p.add_argument("--family", default="learned", help="a study family (its slots on the study model)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10, help="steps per timing")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median reported)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--note", default="", help="a line in the report (e.g. that the machine was shared)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model_cfg = parse_family(args.family).model_config(study_model(24), num_classes=2)
    steps = variants(model_cfg, args.batch)
    for step, _ in steps.values():  # warm-up (compiles)
        for _ in range(3):
            step()
    per_image: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, (step, images) in steps.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            per_image[name].append((time.perf_counter() - start) / (args.steps * images))
    base = per_image["before: one model, eager"]
    command = shlex.join(["python", "-m", "bench.study_step", *(argv if argv is not None else sys.argv[1:])])
    machine = platform.processor() or platform.machine()
    print(f"- Machine: {machine}, CPU, {args.threads} thread(s); torch {torch.__version__}")
    print(f"- Command: `{command}`; family {args.family}, batch {args.batch}. {args.note}")
    print()
    print("| variant | µs per image | speed-up over before (min–max) |")
    print("| --- | ---: | --- |")
    for name, times in per_image.items():
        ratios = [b / t for b, t in zip(base, times, strict=True)]
        print(
            f"| {name} | {1e6 * statistics.median(times):.0f} | "
            f"×{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
