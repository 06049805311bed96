"""``python -m bench.ensemble``: the stacked ensemble's speed-up over training its members one at a time.

For each study family and ensemble size S, the same S runs (seeds 0..S-1 of one red-green task,
the study's model and batch) are trained by the single-model trainer one after another and by
one stacked ensemble; rounds alternate the two, and the table gives the median time of each and
their ratio per round (median, min-max). Both paths include data, the final val and test
evaluation, and model construction, as in the study.

With ``--rate`` (e.g. ``--rate --device cuda --compile off,reduce-overhead``): member optimiser steps
per second of stacks of S study models (:mod:`bench.ensemble_rate`: forward, losses, backward,
clipping, stacked AdamW on random images), S in ``--members`` (``all``: every training of the
family's ``--full`` cells), eager and compiled, paired, with the operations a step dispatches per
member step (all, and those that are no views: at most that many kernel launches on a GPU); the
rate of several stacks in flight (``--in-flight``: CUDA streams and processes, the faster one
named); and the ``--full`` study's training time projected from them (every family's stacks at
their cap, one at a time and with the faster way in flight; compiled: each stack padded to its
bucket, and every graph the study compiles charged at the measured first call; evaluation, probes
and start-up aside). ``--dense`` adds the projected training time of ``--task detect`` and
``--task segment`` (:mod:`bench.dense_cost`).
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

from .dense_cost import DENSE, projection_row
from .ensemble_rate import (
    SEQUENTIAL,
    all_members,
    fit,
    in_flight_rows,
    process_rows,
    projected_seconds,
    rate_rows,
    step_graphs,
)


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
    p.add_argument(
        "--members",
        default="1,10,30,all",
        help="with --rate: stack sizes (1: one model; all: the family's --full cells)",
    )
    p.add_argument(
        "--compile",
        default="off",
        help="with --rate: compile modes of the step, the first the baseline (off,default,"
        "reduce-overhead,max-autotune)",
    )
    p.add_argument("--iters", type=int, default=10, help="with --rate: steps per timing")
    p.add_argument("--in-flight", default="1,2,4", help="with --rate: stacks in flight to time (empty: none)")
    p.add_argument("--processes", action="store_true", help="with --rate: time stacks in flight as processes too")
    p.add_argument("--dense", action="store_true", help="with --rate: project --task detect and segment too")
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


def rate_report(args: argparse.Namespace) -> list[str]:
    """The ``--rate`` tables and projections."""
    device = torch.device(args.device)
    full = StudyConfig.full(model=study_model(args.img_size))
    labels = args.families.split(",")
    unknown = sorted(set(labels) - {f.label for f in full.families})
    if unknown:
        raise SystemExit(f"--families: {', '.join(unknown)} are not families of the --full study")
    modes = tuple(args.compile.split(","))
    rows, fits, firsts = [], {}, {mode: [] for mode in modes}
    for label in labels:
        model_cfg = parse_family(label).model_config(full.model, num_classes=2)
        sizes = [all_members(full, label) if s == "all" else int(s) for s in args.members.split(",")]
        rates: dict[str, dict[int, float]] = {mode: {} for mode in modes}
        for size in sizes:
            for r in rate_rows(model_cfg, args.batch, size, device, modes, args.repeats, args.iters):
                rates[r["compile"]][size] = r["member_steps_per_s"]
                firsts[r["compile"]].append(r["first_call_s"])
                one = rates[r["compile"]].get(1, math.nan)
                speed = r.get(f"speedup_over_{modes[0]}")
                rate = f"{r['member_steps_per_s']:.0f} ({r['low']:.0f}–{r['high']:.0f})"
                ops = f"{r['dispatched_per_member_step']:.1f} / {r['kernels_per_member_step']:.1f}"
                rows.append(
                    f"| {label} | {size} | {r['compile']} | {rate} "
                    f"| ×{r['member_steps_per_s'] / one:.1f} | {ops} | {r['first_call_s']:.1f} | "
                    + ("—" if speed is None else f"×{speed:.2f}")
                    + " |"
                )
                print(rows[-1], flush=True)
        fits[label] = {mode: fit(r) for mode, r in rates.items()}
    lines = [
        "| family | members S | compile | member steps/s (min–max) | × one model | operations per member step "
        "(all / no views) | first call, s | × eager |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    gain, flight = 1.0, []
    counts = [int(k) for k in args.in_flight.split(",") if k]
    if counts:
        model_cfg = parse_family(labels[0]).model_config(full.model, num_classes=2)
        size = min(30, max(int(s) for s in args.members.split(",") if s != "all"))
        flight = in_flight_rows(model_cfg, args.batch, size, device, counts, args.iters * args.repeats)
        if args.processes:
            flight += process_rows(model_cfg, args.batch, size, device, counts, args.iters * args.repeats)
        alone = next(r["member_steps_per_s"] for r in flight if r["stacks"] == min(counts))
        concurrent = [r for r in flight if r["how"] != SEQUENTIAL]  # on a CPU only processes run side by side
        best = max(concurrent, key=lambda r: r["member_steps_per_s"]) if concurrent else None
        gain = best["member_steps_per_s"] / alone if best else 1.0
        lines += [
            "",
            f"Stacks of {size} ({labels[0]}) in flight:",
            "",
            "| stacks | how | member steps/s |",
            "| ---: | --- | ---: |",
            *(f"| {r['stacks']} | {r['how']} | {r['member_steps_per_s']:.0f} |" for r in flight),
            "",
            f"Fastest: {best['stacks']} stack(s), {best['how']}: ×{gain:.2f} over {min(counts)}."
            if best
            else "Nothing ran in flight (streams need CUDA; --processes times processes).",
        ]
    for mode in modes:
        compiled = mode != "off"
        minutes = projected_seconds({label: f[mode] for label, f in fits.items()}, full, compiled=compiled) / 60
        graphs = step_graphs(full, labels) if compiled else 0
        compiling = graphs * statistics.median(firsts[mode]) / 60 if compiled else 0.0
        lines.append(
            f"Projected `--full` training time of {', '.join(labels)} (compile {mode}; every stack at its cap"
            + (", padded to its bucket" if compiled else "")
            + f", batch {args.batch} at {args.img_size} px): {minutes + compiling:.1f} min one stack at a time"
            + (f", {minutes / gain + compiling:.1f} min with the fastest way in flight" if gain != 1.0 else "")
            + (
                f" (compiling included: {graphs} graphs in one process × {statistics.median(firsts[mode]):.0f} s, "
                "the median first call)"
                if compiled
                else ""
            )
        )
    if args.dense:
        for task in DENSE:
            r = projection_row(task, args.device)
            lines.append(
                f"Projected `--task {task}` training time ({r['family']}: {r['step_ms']:.1f} ms per step, "
                f"{r['steps']:,} steps, {r['how']}): {r['projected_min']:.1f} min"
            )
    return lines


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
