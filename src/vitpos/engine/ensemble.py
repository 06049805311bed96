"""Train several models of one config as one: a stacked ensemble.

Every parameter of the S members is stacked on a leading axis; one forward runs all members
through :func:`torch.func.functional_call` under :func:`torch.vmap`, and one AdamW steps the
stacked tensors (:class:`~.stacked_step.StackStep`). AdamW is elementwise, so this is exactly S
independent optimisers, each at its own learning rate; gradient clipping is per member. Each member
keeps its own seed (initialisation, batch order, augmentation), data and learning rate, and ends
where :func:`~vitpos.engine.train.train` would have taken the same model alone
(``tests/engine/test_ensemble.py`` checks it in float64). Only randomness inside the forward
(dropout, drop path) is drawn differently: per member by vmap.

Small models gain most: S members fill the matrix units that one tiny model leaves idle.
An ensemble of one runs its model without vmap. Under vmap every attention call takes the explicit
path (:mod:`vitpos.attention.vmap`), which has a batching rule on every device, so every family
stacks on CUDA too. The ensemble keeps nothing on disk; runs that
need checkpoints, EMA or several processes use the single-model trainer. ``TrainConfig.compile``
compiles the stacked step (:mod:`.stacked_step`; opt-in, off by default).

With a :class:`Stopping` rule each member trains until its validation metric stops improving
(or reaches its task's solved value), with ``epochs`` as the cap, and ends at its best epoch. A
stopped member's updates are masked from then on (its weights and AdamW state frozen exactly), and
the stack ends when its last member stops. A member may stand in for another
(:attr:`Member.fallback_for`: its run on a longer cap, should the other end at its cap): the two train side
by side, and the stand-in stops as soon as the other stops before its cap. With several members every
evaluation is one stacked pass (:mod:`.stack_evaluate`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from ..config import HostConfig
from ..data.dataset import DataSplits, ImageDataset
from ..data.transforms import Augment
from ..models.factory import create_model
from ..models.saved_encoding import load_position_encoding
from ..tasks import primary_metric
from .config import TrainConfig
from .distributed import Dist, epoch_order, pick_device, steps_per_epoch
from .epoch_metrics import EpochMetrics
from .evaluate import evaluate, input_dtype
from .member_course import Course, Stopping, Watch, by_epoch_length
from .optim import decays
from .precision import Precision
from .setup import check_model_fits_data
from .stack_data import MemberSplits
from .stack_evaluate import StackEvaluation, stackable
from .stack_metrics import MemberTasks
from .stacked_step import Stack, StackStep, bucket
from .train import TrainResult, build_augment, step_seed

__all__ = ["Member", "EnsembleError", "Stack", "Stopping", "initial_model", "train_ensemble", "stack_error"]

_PER_MEMBER = ("seed", "data", "init_pe", "lr", "lr_batch", "epochs", "warmup_epochs", "cooldown_epochs", "eval_every")
"""Training options that may differ between the members of one ensemble: the last four make its course."""
_UNSUPPORTED = {"ema_decay": 0.0, "run_dir": None, "save_every": 0, "init": None}
STACKED_EVAL_BATCHES = 4
"""A stacked evaluation's forward takes this many training batches of each member: it keeps no activations
for a backward pass, and the stack's forwards, each a handful of kernels per layer, are fewer."""


class EnsembleError(ValueError):
    """The members cannot train as one ensemble (different settings, or an unsupported option)."""


@dataclass(frozen=True)
class Member:
    """One model of an ensemble: its training settings (seed, data spec, init_pe), its data and, optionally,
    the model it starts from."""

    cfg: TrainConfig
    data: DataSplits
    initial: nn.Module | None = None
    """The model as the single-model trainer builds it from ``cfg`` (seed, init_pe), where the caller has
    built it already (only read: the stack gathers its weights; it is left as it is); None: built here."""
    fallback_for: int | None = None
    """The member (an index of the ensemble) this one stands in for: typically the same run on a longer cap,
    taken if that member ends at its cap. It trains alongside from the first step and stops when that member
    stops before its cap (solved, or out of patience), its last history row then saying ``stop: unneeded``."""


def _shared_settings(members: Sequence[Member]) -> TrainConfig:
    """The settings every member shares; raises where they differ or name an unsupported option."""
    if not members:
        raise EnsembleError("an ensemble needs at least one member")
    first = members[0].cfg
    shared = {k: v for k, v in first.to_dict().items() if k not in _PER_MEMBER}
    for member in members[1:]:
        other = {k: v for k, v in member.cfg.to_dict().items() if k not in _PER_MEMBER}
        differ = sorted(k for k in shared if shared[k] != other[k])
        if differ:
            raise EnsembleError(
                f"ensemble members differ in {', '.join(differ)}; only {', '.join(_PER_MEMBER)} may differ"
            )
    bad = [k for k, off in _UNSUPPORTED.items() if getattr(first, k) != off]
    if bad:
        raise EnsembleError(f"{', '.join(bad)} need the single-model trainer (vitpos.engine.train); leave them off")
    return first


def stack_error(model: nn.Module) -> str | None:
    """Why ``model`` cannot train under :func:`torch.vmap` with stacked parameters, or None if it can
    (tried: a forward and a backward pass on a tiny batch)."""
    params = {k: torch.stack([v.detach()] * 2).requires_grad_(v.requires_grad) for k, v in model.named_parameters()}
    buffers = {k: torch.stack([v] * 2) for k, v in model.named_buffers()}
    size = getattr(model.cfg, "image_hw", (32, 32))
    chans = getattr(model.cfg, "in_chans", 3)
    x = torch.zeros(2, 1, chans, *size, dtype=input_dtype(model), device=next(model.parameters()).device)
    try:
        out = torch.vmap(lambda p, b, xs: functional_call(model, (p, b), (xs,)), randomness="different")(
            params, buffers, x
        )
        out.float().sum().backward()
    except (RuntimeError, NotImplementedError) as err:
        return str(err).splitlines()[0]
    return None


def initial_model(model_cfg: HostConfig, seed: int, init_pe: str | None = None) -> nn.Module:
    """The model a run of ``seed`` starts from, exactly as the single-model trainer builds it (same seed, same
    order), on the CPU."""
    torch.manual_seed(seed)
    model = create_model(model_cfg)
    if init_pe:
        load_position_encoding(model, init_pe)
    return model


def _fallbacks(members: Sequence[Member]) -> dict[int, list[int]]:
    """Each member's fallbacks (:attr:`Member.fallback_for`); raises where one names no other member."""
    out: dict[int, list[int]] = {}
    for k, member in enumerate(members):
        j = member.fallback_for
        if j is None:
            continue
        if not 0 <= j < len(members) or j == k:
            raise EnsembleError(
                f"member {k}: fallback_for = {j} is not another member's index (0 to {len(members) - 1})"
            )
        out.setdefault(j, []).append(k)
    return out


def _initial_of(model_cfg: HostConfig, member: Member) -> nn.Module:
    """The member's initial model: the one it brings (only read), or built from its seed."""
    if member.initial is not None:
        return member.initial
    return initial_model(model_cfg, member.cfg.seed, member.cfg.init_pe)


def train_ensemble(
    model_cfg: HostConfig, members: Sequence[Member], stopping: Stopping | Sequence[Stopping] | None = None
) -> list[TrainResult]:
    """Train every member as :func:`~vitpos.engine.train.train` would alone, all in one stacked model.

    Members share every training option except those of :data:`_PER_MEMBER`: each has its own seed,
    data, initial encoding, learning rate and course (epochs, warm-up, evaluation interval), so
    training sets of different sizes (different steps per epoch) train in one stack, each member
    evaluated at the end of its own epochs; a member at its cap is frozen while the others go on.
    Returns one result per member, in order (no run folder, no checkpoint). With ``stopping`` (one
    rule, or one per member) every epoch is evaluated, each member's history ends at the epoch it
    stopped, and its last row says why (``stop``: solved, patience or cap; ``unneeded`` for a
    :attr:`~Member.fallback_for` whose member stopped before its cap) and which epoch's weights it kept
    (``best_epoch``).

    Between the ends of epochs nothing waits for the device and no Python runs per member: each step
    gathers every member's batch by one index tensor, normalises it, and runs :class:`StackStep`; its
    losses and outputs are kept (:class:`~.epoch_metrics.EpochMetrics`) and reduced to the members'
    training metrics when their epochs end. An augmentation that draws random numbers (crops, flips,
    RandAugment, erasing) runs member by member, each with its own seeded stream, as the single-model
    trainer draws it.
    """
    cfg = _shared_settings(members)
    rules = _rules(stopping, len(members))
    fallbacks = _fallbacks(members)
    device = pick_device(cfg.device)
    infos = [m.data.info for m in members]
    for info in infos:
        check_model_fits_data(model_cfg, info)
    augments = [build_augment(m.cfg, info) for m, info in zip(members, infos, strict=True)]
    if any(a.mixes for a in augments):
        raise EnsembleError("mixup and cutmix need the single-model trainer (vitpos.engine.train); leave them off")
    size = model_cfg.image_hw
    splits = [{s: m.data.split(s).at_size(size) for s in ("train", "val", "test")} for m in members]
    courses = [
        Course(m.cfg, steps_per_epoch(len(s["train"]), cfg.batch_size, Dist()))
        for m, s in zip(members, splits, strict=True)
    ]
    models = [_initial_of(model_cfg, m) for m in members]
    rows = bucket(len(members)) if cfg.compile else len(members)  # a compiled stack pads to a shape it shares
    stack = Stack(models, first=[name for name, on in decays(models[0]).items() if on], rows=rows, device=device)
    try:
        tasks = MemberTasks(infos, device, cfg.label_smoothing)
    except ValueError as err:
        raise EnsembleError(str(err)) from None
    dtype = input_dtype(stack.base)
    precision = Precision.for_run(cfg.amp, cfg.amp_dtype, cfg.cpu_amp, device)
    if precision.scales_gradients:
        raise EnsembleError(
            "TrainConfig.amp_dtype = 'float16' on CUDA needs a gradient scaler, which stacked ensembles do not use: "
            "set amp_dtype to bfloat16 or turn amp off"
        )
    step_fn = StackStep(
        stack, tasks, weight_decay=cfg.weight_decay, betas=cfg.betas, grad_clip=cfg.grad_clip,
        precision=precision,
        compile=("reduce-overhead" if device.type == "cuda" else "default") if cfg.compile else False,
    )  # fmt: skip
    histories: list[list[dict[str, Any]]] = [[] for _ in members]
    watches = [Watch(rule, primary_metric(info.task)) for rule, info in zip(rules, infos, strict=True)] if rules else []
    done = [False] * len(members)
    batched_eval = len(members) > 1 and stackable([s["val"] for s in splits])
    val_eval = StackEvaluation([s["val"] for s in splits], device) if batched_eval else None
    total = max(c.steps for c in courses)
    boundaries: dict[int, list[int]] = {}  # step -> the members whose epochs end (and next begin) there
    for i, c in enumerate(courses):
        for boundary in range(0, c.steps + 1, c.per_epoch):
            boundaries.setdefault(boundary, []).append(i)
    padding = [0] * (rows - len(members))
    step_fn.plan(torch.tensor([[c.rate(t) for c in courses] for t in range(total)], dtype=torch.float64))
    positions = torch.tensor([[t % c.per_epoch for c in courses] + padding for t in range(total)]).to(device)
    train_data = MemberSplits([s["train"] for s in splits], tasks, device, rows)
    orders = torch.zeros(rows, max(c.per_epoch for c in courses), cfg.batch_size, dtype=torch.long, device=device)
    every_row = torch.arange(rows, device=device)
    running = EpochMetrics(tasks, max(c.per_epoch for c in courses))
    draws = any(a.draws for a in augments)
    last_seed = members[-1].cfg.seed  # the forward's stream (dropout): the last member's, as when each drew in turn
    best = stack.flat.clone() if watches else None  # each member's weights at its best epoch so far
    began = [time.perf_counter()] * len(members)
    stack.train(True)
    for step in range(total):
        starting = [i for i in boundaries.get(step, ()) if not done[i]]
        for per_epoch, group in by_epoch_length(starting, courses):  # each member's batches of its new epoch,
            keys = [(len(splits[i]["train"]), members[i].cfg.seed) for i in group]  # one order per (length, seed)
            order = {
                (n, seed): epoch_order(n, cfg.batch_size, seed, step // per_epoch, Dist())
                for n, seed in dict.fromkeys(keys)
            }
            drawn = torch.stack([order[key] for key in keys])
            index = torch.tensor(group, device=device)  # drawn from its seed as its lone run draws them
            orders[index, :per_epoch] = train_data.global_index(drawn, index)
        images, targets = train_data.batch(orders[every_row, positions[step]])
        if draws:  # each member's own stream, seeded as its lone run seeds it; the forward goes on from the last
            x = _padded(torch.stack([_augmented(a, images[i], m.cfg.seed, step) for i, (a, m) in
                                     enumerate(zip(augments, members, strict=True))]), rows)  # fmt: skip
        else:
            torch.manual_seed(step_seed(last_seed, step, 0))
            x = train_data.normalized(images)
        loss, outputs = step_fn(x.to(dtype), targets)
        if rows > len(members):
            loss, outputs, targets = loss[: len(members)], outputs[: len(members)], targets[: len(members)]
        running.add(step, loss, outputs, targets)
        ended = [i for i in boundaries.get(step + 1, ()) if not done[i]]
        if not ended:
            continue
        now = time.perf_counter()  # the epoch's training time ends here
        evaluated = [i for i in ended if watches or courses[i].evaluates(step + 1)]
        val = _evaluate_members(stack, splits, evaluated, cfg, device, precision, val_eval) if evaluated else {}
        stack.train(True)
        trained = running.compute(step, by_epoch_length(ended, courses))
        improved, stopped = [], []
        for i in ended:
            course = courses[i]
            row: dict[str, Any] = {"epoch": (step + 1) // course.per_epoch, "step": step + 1, "lr": course.rate(step)}
            row |= {f"train_{k}": v for k, v in trained[i].items()} | {f"val_{k}": v for k, v in val.get(i, {}).items()}
            if watches:
                if watches[i].update(row["epoch"], val[i]):
                    improved.append(i)
                if not watches[i].stop and step + 1 == course.steps:
                    watches[i].stop = "cap"
                if watches[i].stop:
                    row |= {"stop": watches[i].stop, "best_epoch": watches[i].best_epoch}
            if (watches and watches[i].stop) or step + 1 == course.steps:
                done[i] = True
                stopped.append(i)
            elapsed = now - began[i]
            histories[i].append(
                row | {"time_s": elapsed, "images_per_s": course.per_epoch * cfg.batch_size * len(members) / elapsed}
            )
        for k in _unneeded(stopped, fallbacks, watches, done):  # their members ended before the cap
            done[k] = True
            stopped.append(k)
            if not histories[k]:  # stopped before its first epoch ended
                histories[k].append({"step": step + 1})
            histories[k][-1]["stop"] = "unneeded"
        step_fn.stop(*stopped)  # their updates are masked from the next step on: their runs have ended
        if best is not None and improved:
            index = torch.tensor(improved, device=device)
            best[index] = stack.flat[index]
        for i in ended:
            began[i] = time.perf_counter()  # the next epoch's training time starts after the evaluation
        if all(done):
            break
    if best is not None:
        stack.restore(best)  # every member ends at its best epoch
    test_eval = StackEvaluation([s["test"] for s in splits], device) if batched_eval else None
    test = _evaluate_members(stack, splits, list(range(len(members))), cfg, device, precision, test_eval, "test")
    return [
        TrainResult(stack.module(i, own=True).eval(), None, history, test[i], None, None)
        for i, history in enumerate(histories)
    ]


def _rules(stopping: Stopping | Sequence[Stopping] | None, members: int) -> list[Stopping]:
    """One stopping rule per member (none without ``stopping``)."""
    if stopping is None:
        return []
    rules = [stopping] * members if isinstance(stopping, Stopping) else list(stopping)
    if len(rules) != members:
        raise EnsembleError(f"{len(rules)} stopping rules for {members} members; give one rule, or one per member")
    return rules


def _unneeded(stopped: list[int], fallbacks: dict[int, list[int]], watches: list[Watch], done: list[bool]) -> list[int]:
    """The fallbacks (and theirs in turn) of the members ``stopped`` that stopped before their caps."""
    out: list[int] = []
    ended = [i for i in stopped if watches and watches[i].stop != "cap"]
    while ended:
        ended = [k for i in ended for k in fallbacks.get(i, ()) if not done[k] and k not in out]
        out += ended
    return out


def _padded(rows_first: torch.Tensor, rows: int) -> torch.Tensor:
    """``rows_first`` (S, ...) with its first row repeated up to ``rows`` rows (a padded stack's inputs)."""
    pad = rows - len(rows_first)
    return torch.cat([rows_first, rows_first[:1].expand(pad, *rows_first.shape[1:])]) if pad else rows_first


def _augmented(augment: Augment, images: torch.Tensor, seed: int, step: int) -> torch.Tensor:
    """One member's batch through an augmentation that draws, from the stream its lone run would use."""
    torch.manual_seed(step_seed(seed, step, 0))
    return augment(images, torch.zeros(len(images)))[0]


def _evaluate_members(
    stack: Stack,
    splits: list[dict[str, ImageDataset]],
    which: list[int],
    cfg: TrainConfig,
    device: torch.device,
    precision: Precision,
    stacked: StackEvaluation | None,
    name: str = "val",
) -> dict[int, dict[str, float]]:
    """The metrics of the members ``which`` on their split ``name``: one stacked pass of those members where
    ``stacked`` holds the splits (:data:`STACKED_EVAL_BATCHES` training batches of each member a forward),
    else model by model (each member's module sees its row of the stack)."""
    if stacked is not None:
        some = None if len(which) == len(stack) else which  # only the members evaluated now run
        metrics = stacked(stack, batch_size=STACKED_EVAL_BATCHES * cfg.batch_size, precision=precision, members=some)
        return dict(zip(which, metrics, strict=True))
    return {
        i: evaluate(stack.module(i), splits[i][name], batch_size=cfg.batch_size, device=device, precision=precision,
                    workers=cfg.workers)
        for i in which
    }  # fmt: skip
