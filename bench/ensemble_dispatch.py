"""``python -m bench.ensemble_dispatch``: the operations a stacked study dispatches per member step.

Runs a small red-green study with stacked ensembles (``vitpos study ... --ensemble on``, by default one
family, 10 seeds: a stack of 50 members, every task and training-set size, and the learning-rate
trials) inside a :class:`~vitpos.engine.dispatch.DispatchCount` and divides everything it dispatched (data, models,
training, evaluation, probes) by the member steps it trained: every distinct training in the cells'
records (a colour-shift cell reuses its absolute model) and every learning-rate trial. On a GPU each
operation is a kernel launch (views aside), so this bounds the study's pace there. Eager only: no
dispatch mode runs inside a compiled graph. ``--phases`` also says where the operations go (:data:`PHASES`:
each operation counts towards the innermost of them that is running, within the rate trials or the
reported runs).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from vitpos.cli import main as vitpos
from vitpos.engine.dispatch import DispatchCount, launches
from vitpos.study.execute import TRAINS_AS
from vitpos.study.rates import Rates

STUDY = (
    "--family learned --seeds 10 --epochs 4 --patience 4 --lr-grid 0.005 --train-size 256 "
    "--efficiency-sizes 128 --ensemble on --workers 1 --device cpu"
)
"""The study counted by default."""

PHASES = {
    "StackStep.__call__": "training step",
    "train_ensemble": "training loop around the step",
    "_evaluate_members": "evaluation during training",
    "Stack.__init__": "copying the initial models into the stacks",
    "MemberSplits.__init__": "holding the splits",
    "_prepare": "data and initial models",
    "_test_evaluations": "measurement after training",
    "_measure": "measurement after training",
    "_untrained": "untrained tables",
}
"""Functions (qualified names) that name a phase of a study."""
ON_THE_HOST = ("holding the splits", "data and initial models", "measurement after training", "untrained tables")
"""Phases a CUDA study runs on the CPU: it synthesises the images and initialises the models there, gathers
each stack's splits there and copies them once a tensor, and measures a trained model on the CPU
(``_test_evaluations`` moves it there first: one copy a tensor, which a count on a CPU does not see)."""
OUTER = {"trial_work": "rate trials", "run_cells": "reported runs"}


class PhaseCount(DispatchCount):
    """A dispatch count that also counts per (outer, phase): the innermost :data:`OUTER` and :data:`PHASES`
    function on the Python stack of each operation."""

    def __init__(self) -> None:
        super().__init__()
        self.phases: Counter[tuple[str, str]] = Counter()
        self.phase_kernels: Counter[tuple[str, str]] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        frame, phase, outer = sys._getframe(1), None, "elsewhere"
        while frame is not None:
            name = frame.f_code.co_qualname
            phase = phase or PHASES.get(name)
            if name in OUTER:
                outer = OUTER[name]
                break
            frame = frame.f_back
        self.phases[(outer, phase or "other")] += 1
        if launches(func):
            self.phase_kernels[(outer, phase or "other")] += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


def member_steps(folder: Path) -> int:
    """Optimiser steps of every distinct training of the study in ``folder``: its cells and its rate trials."""
    trainings = {}
    for path in (folder / "cells").rglob("*.json"):
        record = json.loads(path.read_text())
        task, rest = path.stem.split("-", 1)
        trainings[(path.parent.name, TRAINS_AS.get(task, task), rest)] = record.get("steps", 0)  # untrained: 0
    trials = [
        result["steps"]
        for entry in Rates(folder).data.values()
        for task, value in entry.items()
        if task != "family"
        for by_seed in value["trials"].values()
        for result in by_seed.values()
    ]
    return sum(trainings.values()) + sum(trials)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ensemble_dispatch", description=__doc__)
    p.add_argument("--study", default=STUDY, help="the options of `vitpos study` to count (without --out)")
    p.add_argument("--phases", action="store_true", help="also count per phase of the study (slower)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "study"
        start = time.perf_counter()
        with PhaseCount() if args.phases else DispatchCount() as count:
            code = vitpos(["study", *shlex.split(args.study), "--out", str(folder)])
        seconds = time.perf_counter() - start
        if code:
            raise SystemExit(f"vitpos study failed ({code})")
        steps = member_steps(folder)
    command = shlex.join(["python", "-m", "bench.ensemble_dispatch", *(argv if argv is not None else sys.argv[1:])])
    print(f"- Command: `{command}` (torch {torch.__version__}, {seconds:.0f} s)")
    print(f"- Study: `vitpos study {args.study}`")
    print()
    print("| member steps | operations dispatched | per member step | no views | per member step |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {steps:,} | {count.total:,} | {count.total / steps:.1f} | {count.kernels:,} | {count.kernels / steps:.1f} |"
    )
    print()
    print("Most dispatched:", ", ".join(f"{name} {n:,}" for name, n in count.ops.most_common(12)))
    if isinstance(count, PhaseCount):
        print()
        print("| part | phase | operations: all / no views | per member step: all / no views |")
        print("| --- | --- | ---: | ---: |")
        for (outer, phase), n in sorted(count.phases.items(), key=lambda item: -item[1]):
            k = count.phase_kernels[(outer, phase)]
            print(f"| {outer} | {phase} | {n:,} / {k:,} | {n / steps:.1f} / {k / steps:.1f} |")
        host = sum(k for (_, phase), k in count.phase_kernels.items() if phase in ON_THE_HOST)
        print()
        print(
            f"On a GPU: {(count.kernels - host) / steps:.1f} operations per member step (no views) in the phases a "
            f"CUDA study runs on the device, {host / steps:.1f} in those it runs on the CPU ({', '.join(ON_THE_HOST)})."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
