"""The trainer: ``train(model_cfg, train_cfg, data) -> TrainResult``.

AdamW with warm-up + cosine, gradient clipping, optional EMA, bf16 / fp16 autocast (CUDA, or CPU
on request; fp16 with a gradient scaler on CUDA), optional
``torch.compile``, data parallelism under ``torchrun``, checkpoints and ``resume``.

Every optimiser step reseeds torch's generator from (seed, step, rank), and batch order is a
function of (seed, epoch): a run resumed from any checkpoint continues exactly as the
uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from ..compile_cache import compile_privately
from ..config import HostConfig
from ..data.catalog import anchored_spec, open_data
from ..data.dataset import DataSplits
from ..data.padded import model_inputs
from ..data.shards import ShardImages, shard_fingerprint
from ..models.factory import create_model
from ..models.saved_encoding import load_position_encoding
from ..tasks import loss_precision, task_for, task_kind
from ..weights import load_weights
from .board import log_epoch
from .checkpoint import save_checkpoint
from .config import TrainConfig
from .distillation import Distiller, load_teacher, training_loss
from .distributed import Dist, setup, teardown
from .divergence import DivergenceGuard
from .evaluate import evaluate_with_ema, input_dtype
from .interrupt import InterruptRequest, TrainingInterrupted
from .optim import ModelEma, WarmupCosine, build_optimizer, warn_long_warmup
from .pipeline import TrainData, build_augment, eval_split
from .preamble import preamble_lines, run_facts
from .precision import Precision
from .records import write_history, write_run_config, write_summary
from .resume import Resume, RunChangedWarning, checkpoint_to_resume, restore
from .run_lock import locked_run_folder
from .setup import check_model_fits_data, check_train_arguments

__all__ = ["train", "TrainResult", "Resume", "build_augment", "RunChangedWarning"]

LOG = logging.getLogger("vitpos.train")
"""Per-epoch summaries when the progress bar is off (``progress=False``); the CLI prints them."""


@dataclass
class TrainResult:
    """What a finished run hands back."""

    model: nn.Module
    """The trained model (eval mode, on the training device)."""
    ema: nn.Module | None
    history: list[dict[str, Any]]
    """One row per epoch: epoch, step, lr, train_*, val_*, time_s, images_per_s."""
    test: dict[str, float]
    """Final metrics on the test split (``ema_*`` keys for the EMA model)."""
    run_dir: Path | None
    checkpoint: Path | None
    evaluated_split: str = "test"
    """What the data set calls the split of :attr:`test`: ``val`` where it has no test split."""


def step_seed(seed: int, step: int, rank: int) -> int:
    """The generator seed of optimiser step ``step`` on process ``rank`` (augmentation, dropout)."""
    return (seed * 1_000_003 + step) * 4096 + rank


class _Trainer:
    """One run; built (and every input checked) before anything is written."""

    def __init__(
        self,
        model_cfg: HostConfig,
        cfg: TrainConfig,
        data: DataSplits,
        ctx: Dist,
        device: torch.device,
        resume: Resume,
        about: tuple[str | None, Mapping[str, str]] = (None, {}),
    ) -> None:
        self.cfg, self.model_cfg, self.ctx, self.device = cfg, model_cfg, ctx, device
        self.data = data
        self.info = data.info
        check_model_fits_data(model_cfg, self.info)
        size = model_cfg.image_hw
        stride = model_cfg.stride  # padded batches (images of their own sizes) pad to a multiple of it
        self.train_data = TrainData(data, cfg, size, ctx, pin_memory=device.type == "cuda", stride=stride)
        self.shards = shard_fingerprint(data)  # checked on resume: the shards the run read stay the same
        self.augment = self.train_data.augment
        self.val_set, self.test_set = (eval_split(data, s, size, cfg, stride) for s in ("val", "test"))
        steps = self.steps_per_epoch = self.train_data.steps_per_epoch
        cosine_end = (cfg.epochs - cfg.cooldown_epochs) * steps
        self.schedule = WarmupCosine(cfg.peak_lr, cfg.min_lr, round(cfg.warmup_epochs * steps), cosine_end)
        if ctx.is_main:
            warn_long_warmup(self.schedule, cfg.epochs * steps, cfg.warmup_epochs, cfg.epochs)
        if data.image_size is None and self.info.task == "segmentation":  # masks: files of any size
            self._log(f"{self.info.spec}: images and masks are resized to {size[0]}x{size[1]}, the model's img_size")

        torch.manual_seed(cfg.seed)
        self.model = create_model(model_cfg)
        host = getattr(self.model, "pretrained_host", None)  # a segmenter starts from a classifier's host
        if cfg.init and host is not None:
            load_weights(host, cfg.init, drop=("head", *cfg.init_drop))
        elif cfg.init:
            load_weights(self.model, cfg.init, drop=cfg.init_drop, resize_head=True)
        if cfg.init_pe:
            load_position_encoding(self.model, cfg.init_pe)
        self.model = self.model.to(device)
        self.task = task_for(self.info, self.model)
        self.kind = task_kind(self.info.task)
        self.precision = Precision.for_run(cfg.amp, cfg.amp_dtype, cfg.cpu_amp, device)
        self.run_dir = Path(cfg.run_dir) if cfg.run_dir else None
        name, origins = about
        self.facts = run_facts(
            name=name,
            model=self.model,
            model_cfg=model_cfg,
            cfg=cfg,
            data=data,
            device=device,
            precision=self.precision,
            origins=origins,
            run_dir=self.run_dir,
            resumed=None,
        )
        for line in preamble_lines(self.facts, cfg.epochs)[:-1]:  # as soon as known; the last waits for a resume
            self._log(line)
        self.optimizer = build_optimizer(self.model, cfg.lr, cfg.weight_decay, cfg.betas)
        self.scaler = self.precision.scaler()
        self.ema = ModelEma(self.model, cfg.ema_decay) if cfg.ema_decay else None
        self.epoch, self.batch, self.step = 0, 0, 0
        self.history: list[dict[str, Any]] = []
        self.running = self.task.metrics(device)
        self.last_checkpoint: Path | None = None
        self.resumed: dict[str, Any] | None = None
        self.diverged, self.interrupt = DivergenceGuard(cfg, ctx, device), InterruptRequest()
        self._check_run_dir(resume)
        self.facts["resumed"] = self.resumed
        self.preamble = preamble_lines(self.facts, cfg.epochs)
        self._log(self.preamble[-1])

        # the model as it runs: with its distillation teacher, wrapped by DDP, compiled
        self.net: Callable[..., Any] = self.model
        if cfg.teacher:
            self.net = Distiller(self.model, load_teacher(cfg.teacher, self.info.num_outputs, device))
        if ctx.enabled:
            # static_graph: the same parameters take part in every step, used or not
            self.net = DistributedDataParallel(
                self.net, device_ids=[device.index] if device.type == "cuda" else None, static_graph=True
            )
        if cfg.compile:
            self.net = compile_privately(self.net)

    def _check_run_dir(self, resume: Resume) -> None:
        found = checkpoint_to_resume(self.run_dir, resume)
        if found is None:
            return
        streamed = isinstance(self.train_data.split, ShardImages)
        ema = self.ema.module if self.ema else None
        point = restore(
            found,
            self.model,
            ema,
            self.model_cfg,
            self.cfg,
            streamed=streamed,
            shards=self.shards,
            classes=self.info.classes,
            warn=self.ctx.is_main,
        )
        if point.kept:
            self.cfg = self.train_data.cfg = point.cfg
            self._log(point.kept)
        self.optimizer.load_state_dict(point.optimizer)
        self.epoch, self.batch, self.step = point.epoch, point.batch, point.step
        self.history = point.history
        if self.ctx.is_main:  # the saved sums are already totals over all processes
            self.running.load_state(point.running)
        self.last_checkpoint = point.path
        self.resumed = {"checkpoint": str(point.path), "epoch": self.epoch, "step": self.step}

    def _log(self, text: str) -> None:
        if not self.ctx.is_main:
            return
        if self.cfg.progress:
            tqdm.write(text)
        else:
            LOG.info(text)

    def fit(self) -> TrainResult:
        cfg, ctx = self.cfg, self.ctx
        if self.run_dir is not None and ctx.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_run_config(self.run_dir, self.model_cfg, cfg, self.preamble)
            write_history(self.run_dir, self.history)
        start = time.perf_counter()
        # one bar for the whole run, so its ETA is the run's
        self.bar = tqdm(
            total=cfg.epochs * self.steps_per_epoch,
            initial=self.step,
            leave=False,
            dynamic_ncols=True,
            disable=not (ctx.is_main and cfg.progress),
            unit="step",
        )
        with self.bar, self.interrupt.deferred(enabled=not ctx.enabled):
            while self.epoch < cfg.epochs:
                self._train_epoch()
                if self.interrupt.requested:  # the epoch's checkpoint is written
                    raise TrainingInterrupted(self.step, self.run_dir, self.last_checkpoint)
        test = self._evaluate(self.test_set, "")
        split = self.data.test_name
        if self.run_dir is not None and ctx.is_main:
            write_summary(
                self.run_dir,
                {
                    "evaluated_split": split,
                    split: test,
                    "params": self.facts["params"],
                    "train_time_s": time.perf_counter() - start,
                    "checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
                    "run": self.facts,
                },
            )
        self._log(f"{split}: " + "  ".join(self.kind.format_metric(k, v) for k, v in test.items()))
        return TrainResult(
            self.model.eval(),
            self.ema.module if self.ema else None,
            self.history,
            test,
            self.run_dir,
            self.last_checkpoint,
            split,
        )

    def _train_epoch(self) -> None:
        cfg, ctx, device = self.cfg, self.ctx, self.device
        self.model.train()
        dtype = input_dtype(self.model)
        bar = self.bar
        bar.set_description(f"epoch {self.epoch + 1}/{cfg.epochs}", refresh=False)
        began, first = time.perf_counter(), self.batch
        seed_of = lambda k, step=self.step: step_seed(cfg.seed, step + k, ctx.rank)  # noqa: E731
        for x, y, targets in self.train_data.device_batches(self.epoch, self.batch, device, seed_of, self._log):
            x, padding = model_inputs(x.to(dtype), y)
            lr = self.schedule.apply(self.optimizer, self.step)
            with self.precision.autocast():
                outputs = loss_precision(self.net(x, **padding))
            loss, outputs = training_loss(outputs, y, self.task, cfg.label_smoothing)
            self.diverged.watch(loss, self.step + 1)
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            if cfg.grad_clip:
                self.scaler.unscale_(self.optimizer)
                nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            if self.ema is not None:
                self.ema.update(self.model)
            self.running.add_loss(loss, len(x))
            if not self.augment.mixes:
                self.running.add_predictions(outputs, targets)
            self.step += 1
            self.batch += 1
            bar.update(1)
            if self.batch % 10 == 0 or self.batch == self.steps_per_epoch:
                self.diverged.check(self.step, self.last_checkpoint)
                seen = (self.batch - first) * cfg.batch_size
                bar.set_postfix(self.running.compute() | {"img/s": seen / (time.perf_counter() - began)}, refresh=False)
            saving = cfg.save_every and self.step % cfg.save_every == 0
            if (saving or self.interrupt.requested) and self.batch < self.steps_per_epoch:
                self._save(lr)
            if self.interrupt.requested and self.batch < self.steps_per_epoch:
                raise TrainingInterrupted(self.step, self.run_dir, self.last_checkpoint)
        elapsed = time.perf_counter() - began
        row = {"epoch": self.epoch + 1, "step": self.step, "lr": lr}
        row |= {f"train_{k}": v for k, v in self.running.reduced(ctx).compute().items()}
        if (self.epoch + 1) % cfg.eval_every == 0 or self.epoch + 1 == cfg.epochs:
            row |= self._evaluate(self.val_set, "val_")
        row |= {"time_s": elapsed, "images_per_s": (self.batch - first) * cfg.batch_size / elapsed}
        self.history.append(row)
        self.epoch, self.batch = self.epoch + 1, 0
        self.running = self.task.metrics(device)
        if self.run_dir is not None and ctx.is_main:
            write_history(self.run_dir, self.history)
            log_epoch(self.run_dir, row, cfg.log)
        self._save(lr)
        self._log(
            f"epoch {row['epoch']}/{cfg.epochs}  "
            + "  ".join(
                self.kind.format_metric(k, v)
                for k, v in row.items()
                if k.startswith(("train_", "val_", "ema_")) or k == "images_per_s"
            )
        )

    def _evaluate(self, dataset, prefix: str) -> dict[str, float]:
        return evaluate_with_ema(
            self.model,
            self.ema.module if self.ema else None,
            dataset,
            prefix,
            batch_size=self.cfg.batch_size,
            device=self.device,
            ctx=self.ctx,
            precision=self.precision,
            workers=self.cfg.workers,
        )

    def _save(self, lr: float) -> None:
        """Checkpoint the current position (called on every process; rank 0 writes)."""
        if self.run_dir is None:
            return
        self.diverged.check(self.step, self.last_checkpoint)
        self.diverged.check_weights(self.model, self.step, self.last_checkpoint)
        running = self.running.reduced(self.ctx).state()
        if self.ctx.is_main:
            meta = {
                "model_config": self.model_cfg.to_dict(),
                "train_config": self.cfg.to_dict(),
                "data": dataclasses.asdict(self.info),
                "epoch": self.epoch,
                "step": self.step,
            }
            state = {
                "optimizer": self.optimizer.state_dict(),
                "epoch": self.epoch,
                "batch": self.batch,
                "step": self.step,
                "lr": lr,
                "history": self.history,
                "running": running,
                "shards": self.shards,
            }
            self.last_checkpoint = save_checkpoint(
                self.run_dir,
                self.step,
                self.model,
                meta,
                state,
                self.ema.module if self.ema else None,
                self.cfg.keep_checkpoints,
            )
        self.ctx.barrier()


def train(
    model_cfg: HostConfig,
    cfg: TrainConfig,
    data: DataSplits | None = None,
    *,
    resume: Resume = False,
    name: str | None = None,
    origins: Mapping[str, str] | None = None,
) -> TrainResult:
    """Train a model built from ``model_cfg`` on ``data`` (default: ``open_data(cfg.data)``).

    The run records ``data.info.spec``, the full spec of the data it was given, as its data (with absolute paths).
    Under ``torchrun`` every process calls this with the same arguments. With ``resume=True``
    the run continues from the newest checkpoint in ``cfg.run_dir`` (an error if there is
    none); ``resume="if_present"`` starts a new run when there is nothing to resume. The run
    folder is locked (:mod:`vitpos.engine.run_lock`) while the run lasts. ``name`` (the preset) and
    ``origins`` (where each given setting came from: ``recipe deit``, ``command line`` ...) are
    printed before the first step and kept in the run's ``config.yaml`` and ``summary.json``.
    """
    check_train_arguments(model_cfg, cfg, data)
    if data is None:
        data = open_data(cfg.data, patch_size=model_cfg.patch_size)
    cfg = cfg.replace(data=anchored_spec(data.info.spec))  # the data actually used, in full, its paths absolute
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it to be deterministic
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    owns_group = not (torch.distributed.is_available() and torch.distributed.is_initialized())
    ctx, device = setup(cfg.device)
    try:
        with locked_run_folder(cfg.run_dir if ctx.is_main else None):
            result = _Trainer(model_cfg, cfg, data, ctx, device, resume, (name, origins or {})).fit()
    except BaseException:
        if owns_group:
            teardown(wait_for_peers=False)
        raise
    if owns_group:
        teardown()
    return result
