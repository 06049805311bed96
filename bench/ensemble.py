"""``python -m bench.ensemble``: the stacked ensemble's speed-up over training its members one at a time.

For each study family and ensemble size S, the same S runs (seeds 0..S-1 of one red-green task,
the study's model and batch) are trained by the single-model trainer one after another and by
one stacked ensemble; rounds alternate the two, and the table gives the median time of each and
their ratio per round (median, min-max). Both paths include data, the final val and test
evaluation, and model construction, as in the study.

With ``--rate`` (e.g. ``--rate --device cuda --members 1,10,40``): optimiser steps per second of a
stack of S study models (forward, loss, backward, clipping, AdamW on random images), S = 1 being
one model, and the ``--full`` study's training time projected from them: every family's capped
optimiser steps (:func:`bench.study_cost.training_steps`) at the member steps per second of its
stack of 10 (``--full``'s seeds), one ensemble at a time; evaluation, probes and pretraining aside.
"""

from __future__ import annotations

import argparse
import math
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

import torch

from vitpos.config import ModelConfig
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.ensemble import Member, stack_error, train_ensemble
from vitpos.engine.train import train
from vitpos.models.factory import create_model
from vitpos.study.families import DEFAULT_FAMILIES, parse_family
from vitpos.study.protocol import StudyConfig, study_model

from .study_cost import training_steps
from .study_step import stack_step


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.ensemble", description=__doc__)
    p.add_argument(
        "--families", default="learned,fourier,peg,lape_learned,irpe_product", help="comma-separated study families"
    )
    p.add_argument("--all-families", action="store_true", help="every default study family instead of --families")
    p.add_argument("--sizes", default="5,10", help="comma-separated ensemble sizes S")
    p.add_argument("--img-size", type=int, default=24, help="image side (24: the default study; 32: --full)")
    p.add_argument("--train", type=int, default=640, help="training images per run")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds (median reported)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--note", default="", help="a line in the report (e.g. that the machine was shared)")
    p.add_argument("--rate", action="store_true", help="steps per second of stacks of --members, and the --full time")
    p.add_argument("--members", default="1,10,40", help="with --rate: comma-separated stack sizes (1: one model)")
    p.add_argument("--steps", type=int, default=20, help="with --rate: timed steps per stack (after 3 warm-up steps)")
    return p.parse_args(argv)


def _members(size: int, args: argparse.Namespace) -> list[Member]:
    out = []
    for seed in range(size):
        data = SyntheticTask(
            "direction", img_size=args.img_size, square_size=4, train=args.train, val=100, test=100, seed=seed
        ).splits()
        cfg = TrainConfig(
            data=data.info.spec,
            epochs=args.epochs,
            batch_size=args.batch,
            lr=2e-3,
            warmup_epochs=0.1,
            seed=seed,
            device=args.device,
            eval_every=args.epochs,
            progress=False,
        )
        out.append(Member(cfg, data))
    return out


def _one_at_a_time(model_cfg: ModelConfig, members: list[Member]) -> None:
    for m in members:
        train(model_cfg, m.cfg, m.data)


def _seconds(fn: Callable[[], object]) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def stack_rate(model_cfg: ModelConfig, members: int, args: argparse.Namespace) -> float:
    """Optimiser steps per second of a stack of ``members`` models (each step trains every member once)."""
    step = stack_step(model_cfg, args.batch, members, args.device)
    for _ in range(3):
        step()
    _sync(args.device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    _sync(args.device)
    return args.steps / (time.perf_counter() - start)


def projected_seconds(member_rates: dict[str, float], steps: dict[str, int]) -> float:
    """Seconds to train every family's ``steps`` at its member steps per second, one family after another."""
    return sum(steps[label] / rate for label, rate in member_rates.items())


def rate_report(args: argparse.Namespace) -> list[str]:
    """The ``--rate`` table's rows and the projection of the ``--full`` study's training time."""
    sizes = [int(s) for s in args.members.split(",")]
    full = StudyConfig.full()
    labels = args.families.split(",")
    unknown = sorted(set(labels) - {f.label for f in full.families})
    if unknown:
        raise SystemExit(f"--families: {', '.join(unknown)} are not families of the --full study")
    rows, member_rates = [], {}
    for label in labels:
        model_cfg = study_model(args.img_size).replace(**parse_family(label).model_overrides, num_classes=2)
        rates = {s: stack_rate(model_cfg, s, args) for s in sizes}
        for s, rate in rates.items():
            speed = f"×{s * rate / rates.get(1, math.nan):.1f}"
            rows.append(f"| {label} | {s} | {rate:.1f} | {s * rate:.0f} | {speed} |")
            print(rows[-1], flush=True)
        if full.seeds in rates:
            member_rates[label] = full.seeds * rates[full.seeds]
    table = [
        "| family | members S | stack steps/s | member steps/s | × one model |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    if len(member_rates) < len(labels):
        return [*table, *rows, "", f"No `--full` projection: --members lacks {full.seeds} (`--full`'s seeds)."]
    steps = training_steps(full)
    total = sum(steps[label] for label in labels)
    minutes = projected_seconds(member_rates, steps) / 60
    return [
        *table,
        *rows,
        "",
        f"Projected `--full` training time of {', '.join(labels)} ({total:,} member optimiser steps at the cap, "
        f"stacks of {full.seeds} at batch {args.batch} and {args.img_size} px, one at a time; `--full` trains "
        f"batch {full.batch_size} at {full.model.image_hw[0]} px): {minutes:.1f} min",
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.all_families:
        args.families = ",".join(f.label for f in DEFAULT_FAMILIES)
    torch.set_num_threads(args.threads)
    if args.rate:
        lines = rate_report(args)
        print()
        print(
            f"- Device {args.device}; torch {torch.__version__}; batch {args.batch} at {args.img_size} px.", args.note
        )
        print("\n".join(lines))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for label in args.families.split(","):
        family = parse_family(label)
        model_cfg = study_model(args.img_size).replace(**family.model_overrides, num_classes=2)
        error = stack_error(create_model(model_cfg).to(args.device).train())
        if error:
            rows.append(f"| {label} | — | — | — | cannot be vmapped ({error[:80]}): one model at a time |")
            continue
        for size in sizes:
            members = _members(size, args)
            train_ensemble(model_cfg, members[:2])  # warm-up
            alone, together, ratios = [], [], []
            for _ in range(args.repeats):
                a = _seconds(partial(_one_at_a_time, model_cfg, members))
                b = _seconds(partial(train_ensemble, model_cfg, members))
                alone.append(a)
                together.append(b)
                ratios.append(a / b)
            rows.append(
                f"| {label} | {size} | {statistics.median(alone):.1f} | {statistics.median(together):.1f} | "
                f"×{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |"
            )
            print(rows[-1], flush=True)
    steps = args.train // args.batch * args.epochs
    print()
    machine = platform.processor() or platform.machine()
    command = shlex.join(["python", "-m", "bench.ensemble", *(argv if argv is not None else sys.argv[1:])])
    print(f"- Machine: {machine}, device {args.device}, {args.threads} thread(s); torch {torch.__version__}")
    print(f"- Command: `{command}`")
    print(
        f"- Each run: {steps} steps of batch {args.batch} at {args.img_size} px, then val and test evaluation.",
        args.note,
    )
    print()
    print("| family | S | S runs one at a time, s | one ensemble of S, s | speed-up (min–max) |")
    print("| --- | ---: | ---: | ---: | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
