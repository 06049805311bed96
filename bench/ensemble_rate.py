"""Member steps per second of stacked study models, and the study wall times they project.

A stack step (:class:`vitpos.engine.stacked_step.StackStep`: forward, losses, backward, clipping,
stacked AdamW, in the study's precision on the device) on random images, eager or compiled; timings
are paired (:func:`bench.timing.paired_overheads`: eager between the compiled rounds) and synchronised.
The seconds per stack step of S members are fitted as ``a + b * S`` (launch cost plus per-member
work) over the measured sizes, which prices every stack a protocol trains: the ``--full`` study's
(:func:`full_stacks`: one stack per family and training-set size, its learning-rate trials as one
more, the pretraining one model at a time) at its optimiser steps' cap, evaluation aside.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch._inductor.metrics as metrics

from vitpos.config import HostConfig
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.dispatch import DispatchCount
from vitpos.engine.optim import decays
from vitpos.engine.precision import Precision
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.engine.stacked_step import Stack, StackStep, bucket
from vitpos.models.factory import create_model
from vitpos.study.cells import UNTRAINED
from vitpos.study.execute import training_key
from vitpos.study.protocol import StudyConfig
from vitpos.study.rates import TRAINING_TASKS
from vitpos.study.schedule import jobs_of

from .gpu_steps import synchronize
from .timing import paired_overheads

SEQUENTIAL = "one after another (no streams on a CPU)"
"""How :func:`in_flight_rows` runs its stacks where there are no CUDA streams."""

__all__ = [
    "SEQUENTIAL",
    "Fit", "stack_step", "at_constant_rate", "operations",
    "rate_rows", "fit", "training_stacks", "stepped_stacks", "full_stacks",
    "step_graphs", "all_members", "projected_seconds",
    "in_flight_rows", "process_rows",
]  # fmt: skip


def stack_step(model_cfg: HostConfig, batch: int, members: int, device: torch.device, compile: str) -> StackStep:
    """A stack of ``members`` study models (seeds 0..S-1, the study's tasks in turn, as its stacks mix them) with
    the study's optimiser settings and precision; compiled, padded to its :func:`bucket`."""
    models = []
    for seed in range(members):
        torch.manual_seed(seed)
        models.append(create_model(model_cfg).to(device).train())
    rows = members if compile == "off" else bucket(members)  # a compiled stack pads to its shared shape
    stack = Stack(models, first=[name for name, on in decays(models[0]).items() if on], rows=rows)
    cfg = TrainConfig()
    tasks = MemberTasks([SyntheticTask(TRAINING_TASKS[i % len(TRAINING_TASKS)]).info for i in range(members)], device)
    precision = Precision.for_run(cfg.amp, cfg.amp_dtype, cfg.cpu_amp, device)
    return StackStep(
        stack, tasks, weight_decay=0.05, betas=cfg.betas, grad_clip=1.0, precision=precision, compile=compile
    )


def _inputs(model_cfg: HostConfig, batch: int, members: int, device: torch.device) -> tuple:
    """Random images and labels (as the stacked targets hold them) of a stack step."""
    x = torch.randn(members, batch, model_cfg.in_chans, *model_cfg.image_hw, device=device)
    targets = torch.randint(0, 2, (members, batch, 2), device=device).float()  # a label or (dx, dy) per image
    return x, targets


def at_constant_rate(step: StackStep, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One call of ``step``, every member at 1e-3 (1,000 more steps planned whenever its plan runs out)."""
    optimizer = step.optimizer
    if optimizer.taken == len(optimizer.schedule):
        step.plan(torch.full((1000, len(step.tasks)), 1e-3, dtype=torch.float64))
    return step(x, targets)


def runner(step: StackStep, model_cfg: HostConfig, batch: int, device: torch.device) -> Callable[[], None]:
    """One synchronised call of ``step`` on fixed random images and labels."""
    x, targets = _inputs(model_cfg, batch, step.stack.rows, device)

    def run() -> None:
        at_constant_rate(step, x, targets)
        synchronize(device)

    return run


def rate_rows(
    model_cfg: HostConfig,
    batch: int,
    members: int,
    device: torch.device,
    modes: Sequence[str],
    repeats: int,
    iters: int,
) -> list[dict]:
    """Member steps/s of a stack of ``members`` in each compile mode (the first is the paired baseline), with
    each mode's first call (compiling) timed and the operations one step dispatches (:mod:`vitpos.engine.dispatch`:
    all, and those that are no views) per member step."""
    runs, first, counts = {}, {}, {}
    for mode in modes:
        run = runner(stack_step(model_cfg, batch, members, device, mode), model_cfg, batch, device)
        generated = metrics.generated_kernel_count
        start = time.perf_counter()
        run()
        first[mode] = time.perf_counter() - start
        runs[mode] = run
        counts[mode] = operations(run, metrics.generated_kernel_count - generated if mode != "off" else None)
    rates, over = paired_overheads(runs, modes[0], members, warmup=2, repeats=repeats, iters=iters)
    return [
        {
            "members": members,
            "compile": mode,
            "member_steps_per_s": rates[mode].median,
            "low": rates[mode].low,
            "high": rates[mode].high,
            "first_call_s": first[mode],
            "dispatched_per_member_step": counts[mode][0] / members,
            "kernels_per_member_step": counts[mode][1] / members,
            **({} if mode == modes[0] else {"speedup_over_" + modes[0]: 1 / (1 + over[mode].median)}),
        }
        for mode in modes
    ]


def operations(run: Callable[[], None], generated: int | None = None) -> tuple[int, int]:
    """(operations, of which no views) of one call of ``run``. Eager (``generated`` None): every operation
    dispatched (:class:`~vitpos.engine.dispatch.DispatchCount`). Compiled, where no dispatch mode may run: the
    ATen operations the graph calls (profiled, outermost only: matrix products, convolutions, copies) plus the
    ``generated`` kernels Inductor wrote for it, each run once a call."""
    if generated is None:
        with DispatchCount() as count:
            run()
        return count.total, count.kernels
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        run()
    called = [
        e.name
        for e in profile.events()
        if e.name.startswith("aten::") and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::"))
    ]
    views = sum(1 for name in called if name in _NO_KERNEL)
    return len(called) + generated, len(called) - views + generated


_NO_KERNEL = {"aten::resolve_conj", "aten::resolve_neg", "aten::view", "aten::as_strided", "aten::reshape", "aten::t"}
"""Profiled ATen operations that launch nothing."""


@dataclass(frozen=True)
class Fit:
    """Seconds per stack step of S members: ``launch + per_member * S``."""

    launch: float
    per_member: float

    def seconds(self, members: int) -> float:
        return max(self.launch + self.per_member * members, 0.0)


def fit(rates: dict[int, float]) -> Fit:
    """The least-squares line through the seconds per stack step (S / member steps/s) at each measured S."""
    sizes = sorted(rates)
    seconds = [s / rates[s] for s in sizes]
    if len(sizes) == 1:
        return Fit(0.0, seconds[0] / sizes[0])
    mean_s, mean_t = statistics.fmean(sizes), statistics.fmean(seconds)
    slope = sum((s - mean_s) * (t - mean_t) for s, t in zip(sizes, seconds, strict=True)) / sum(
        (s - mean_s) ** 2 for s in sizes
    )
    return Fit(mean_t - slope * mean_s, slope)


def _stacked(config: StudyConfig, runs: int) -> int:
    """The members of a stack of ``runs``: each run and, where runs at their caps train again, its longer twin
    (:func:`vitpos.study.execute.run_cells`)."""
    return runs * (2 if config.extends else 1)


def training_stacks(config: StudyConfig, label: str) -> list[tuple[int, int]]:
    """(members, optimiser steps at the first cap) of the stacks family ``label`` trains its first round in:
    one holding every seed, task and training-set size (and their longer twins), stepping as long as its
    longest first cap."""
    out = []
    for job in jobs_of([c for c in config.cells() if c.family == label and c.train_size != UNTRAINED], {label}):
        trainings = {training_key(c) for c in job}
        steps = max(config.epochs_for(size) * (size // config.batch_size) for _, _, size, _ in trainings)
        out.append((_stacked(config, len(trainings)), steps))
    return out


def _trials(config: StudyConfig) -> int:
    """The members of a family's learning-rate trials' stack: every training task at every rate of the grid on
    every trial seed (and their longer twins)."""
    return _stacked(config, len(TRAINING_TASKS) * len(config.lr_grid) * len(config.rate_seeds))


def stepped_stacks(config: StudyConfig, label: str) -> list[tuple[int, int]]:
    """The stacks family ``label`` trains with the stacked step: :func:`training_stacks` and its learning-rate
    trials as one more."""
    out = training_stacks(config, label)
    if config.tries_rates:
        out.append((_trials(config), config.epochs * (config.train_size // config.batch_size)))
    return out


def full_stacks(config: StudyConfig, label: str) -> list[tuple[int, int]]:
    """:func:`stepped_stacks` and the pretraining (one model per task, by the single-model trainer)."""
    family = next(f for f in config.families if f.label == label)
    out = stepped_stacks(config, label)
    if family.pretrained:
        out += [(1, config.pretrain_epochs * (config.pretrain_size // config.batch_size))] * 2
    return out


def step_graphs(config: StudyConfig, labels: Sequence[str] | None = None) -> int:
    """The step graphs a compiled study compiles in one process (:class:`~vitpos.engine.stacked_step.StackStep`:
    one per model, padded member count and mix of task kinds) among the stacks of ``labels`` (default: all)."""
    kind = {task: SyntheticTask(task).info.task for task in TRAINING_TASKS}
    keys = set()
    for family in config.families:
        if labels is not None and family.label not in labels:
            continue
        model = repr(family.model_config(config.model, num_classes=2))
        for job in jobs_of([c for c in config.cells() if c.family == family.label], {family.label}):
            trainings = {training_key(c) for c in job}
            members = _stacked(config, len(trainings))
            keys.add((model, bucket(members), frozenset(kind[task] for _, task, _, _ in trainings)))
        if config.tries_rates:
            trials = _trials(config)
            keys.add((model, bucket(trials), frozenset(kind.values())))
    return len(keys)


def projected_seconds(
    fits: dict[str, Fit], config: StudyConfig, in_flight_gain: float = 1.0, compiled: bool = False
) -> float:
    """Training seconds of ``config``'s families at their fitted rates, every stack at its cap, one stack at a
    time divided by ``in_flight_gain`` (the measured gain of several stacks in flight); ``compiled``: each
    stack padded to its :func:`~vitpos.engine.stacked_step.bucket` (the compile time is the caller's to add)."""
    total = sum(
        steps * fits[label].seconds(bucket(members) if compiled and members > 1 else members)
        for label in fits
        for members, steps in full_stacks(config, label)
    )
    return total / in_flight_gain


def all_members(config: StudyConfig, label: str) -> int:
    """Every distinct training of family ``label``'s cells (all sizes, seeds and tasks): the rate table's
    'all members' stack."""
    return sum(members for members, _ in training_stacks(config, label))


def _round(runs: list[StackStep], streams: list, inputs: list[tuple], device: torch.device) -> None:
    """One step of every stack, each on its stream (None: the current one), then a synchronisation."""
    for step, stream, (x, targets) in zip(runs, streams, inputs, strict=True):
        if stream is None:
            at_constant_rate(step, x, targets)
        else:
            with torch.cuda.stream(stream):
                at_constant_rate(step, x, targets)
    synchronize(device)


def in_flight_rows(
    model_cfg: HostConfig, batch: int, members: int, device: torch.device, counts: Sequence[int], steps: int
) -> list[dict]:
    """Member steps/s of ``k`` eager stacks of ``members`` in flight for each ``k`` of ``counts``: each on its
    own CUDA stream (on a CPU: one after another, the same code without streams)."""
    rows = []
    for k in counts:
        runs = [stack_step(model_cfg, batch, members, device, "off") for _ in range(k)]
        streams = [torch.cuda.Stream(device) for _ in runs] if device.type == "cuda" else [None] * k
        inputs = [_inputs(model_cfg, batch, members, device) for _ in runs]
        for _ in range(2):
            _round(runs, streams, inputs, device)
        start = time.perf_counter()
        for _ in range(steps):
            _round(runs, streams, inputs, device)
        seconds = time.perf_counter() - start
        how = "CUDA streams" if device.type == "cuda" else SEQUENTIAL
        rows.append({"stacks": k, "members": members, "how": how, "member_steps_per_s": k * members * steps / seconds})
    return rows


def _process(model_cfg: HostConfig, batch: int, members: int, device: str, steps: int, barrier, out) -> None:
    """One stack in a process of its own: warm up, wait for the others, time ``steps`` steps."""
    torch.set_num_threads(1)
    run = runner(
        stack_step(model_cfg, batch, members, torch.device(device), "off"), model_cfg, batch, torch.device(device)
    )
    for _ in range(2):
        run()
    barrier.wait()
    start = time.perf_counter()
    for _ in range(steps):
        run()
    out.put(time.perf_counter() - start)


def process_rows(
    model_cfg: HostConfig, batch: int, members: int, device: torch.device, counts: Sequence[int], steps: int
) -> list[dict]:
    """Member steps/s of ``k`` stacks of ``members`` in flight, each in its own (spawned) process, timed from a
    common start after every process has warmed up; the slowest process's time counts."""
    context = multiprocessing.get_context("spawn")
    rows = []
    for k in counts:
        barrier, out = context.Barrier(k), context.Queue()
        args = (model_cfg, batch, members, str(device), steps, barrier, out)
        processes = [context.Process(target=_process, args=args) for _ in range(k)]
        for process in processes:
            process.start()
        seconds = max(out.get(timeout=600) for _ in processes)
        for process in processes:
            process.join()
        rows.append(
            {"stacks": k, "members": members, "how": "processes", "member_steps_per_s": k * members * steps / seconds}
        )
    return rows
