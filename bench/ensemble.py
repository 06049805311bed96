"""``python -m bench.ensemble``: the stacked ensemble's speed-up over training its members one at a time.

For each study family and ensemble size S, the same S runs (seeds 0..S-1 of one red-green task,
the study's model and batch) are trained by the single-model trainer one after another and by
one stacked ensemble; rounds alternate the two, and the table gives the median time of each and
their ratio per round (median, min-max). Both paths include data, the final val and test
evaluation, and model construction, as in the study.
"""

from __future__ import annotations

import argparse
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
from vitpos.study.families import parse_family
from vitpos.study.protocol import study_model


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.ensemble", description=__doc__)
    p.add_argument(
        "--families", default="learned,fourier,peg,lape_learned,irpe_product", help="comma-separated study families"
    )
    p.add_argument("--sizes", default="5,10", help="comma-separated ensemble sizes S")
    p.add_argument("--img-size", type=int, default=24, help="image side (24: the default study; 32: --full)")
    p.add_argument("--train", type=int, default=640, help="training images per run")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds (median reported)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--note", default="", help="a line in the report (e.g. that the machine was shared)")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for label in args.families.split(","):
        family = parse_family(label)
        model_cfg = study_model(args.img_size).replace(**family.model_overrides, num_classes=2)
        error = stack_error(create_model(model_cfg).train())
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
