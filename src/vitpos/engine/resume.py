"""Resuming a run from its folder: which checkpoint continues it, what it restores, what may change.

A resumed run loads the newest checkpoint's weights (and EMA weights), optimiser state, position
(epoch, batch, step), history and running metric sums, and continues exactly as the uninterrupted
run would have. Options that only keep the books (:data:`BOOKKEEPING`) may change freely; any other
change is carried out and warned about (:class:`RunChangedWarning`).
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torch import nn

from ..config import HostConfig
from ..data.catalog import anchored_spec
from ..data.shards import check_same_shards
from ..errors import VitposError
from ..weights import WeightsFile, load_weights
from .checkpoint import CheckpointError, check_same_model, latest_checkpoint, load_training_checkpoint
from .config import TrainConfig
from .resume_data import keep_stream_settings

__all__ = ["BOOKKEEPING", "Resume", "ResumePoint", "RunChangedWarning", "checkpoint_to_resume", "restore"]

Resume = bool | Literal["if_present"]
"""``True``: continue the run folder's newest checkpoint; ``"if_present"``: only when there is one."""

BOOKKEEPING = frozenset(
    {
        "device",
        "workers",
        "run_dir",
        "save_every",
        "keep_checkpoints",
        "eval_every",
        "progress",
        "compile",
        "deterministic",
    }
)
"""Training options that may change on resume without changing what the run computes."""


class RunChangedWarning(UserWarning):
    """A resumed run continues with options that differ from those it was started with."""


@dataclass
class ResumePoint:
    """Where a resumed run continues, read from its checkpoint (the weights are already loaded)."""

    path: Path
    cfg: TrainConfig
    """The run's options, with the saved stream settings kept (:mod:`vitpos.engine.resume_data`)."""
    kept: str | None
    """The line that says which stream settings were kept, if any."""
    optimizer: dict[str, Any]
    epoch: int
    batch: int
    step: int
    history: list[dict[str, Any]]
    running: list[float]
    """The running training metric sums, already totals over all processes."""


def checkpoint_to_resume(run_dir: Path | None, resume: Resume) -> Path | None:
    """The checkpoint in ``run_dir`` a run continues from, or None for a new run; an error where ``resume``
    and the folder disagree (a checkpoint but no resume, resume but no checkpoint or no folder)."""
    if run_dir is None:
        if resume:
            raise VitposError("resume needs a run folder (run_dir)")
        return None
    found = latest_checkpoint(run_dir)
    if found is not None and not resume:
        raise VitposError(
            f"run folder {run_dir} already holds checkpoint {found.name}; pass --resume to "
            "continue it, or choose another --run-dir"
        )
    if found is None and resume is True:
        raise VitposError(
            f"run folder {run_dir} holds no checkpoint to resume (is the path right?); drop --resume to start "
            "a new run there, or pass --resume-if-present to start one only when there is nothing to resume"
        )
    return found


def restore(
    path: Path,
    model: nn.Module,
    ema: nn.Module | None,
    model_cfg: HostConfig,
    cfg: TrainConfig,
    *,
    streamed: bool,
    shards: dict[str, str] | None = None,
    classes: tuple[str, ...] | None = None,
    warn: bool = True,
) -> ResumePoint:
    """Load the checkpoint at ``path`` into ``model`` (and ``ema``) and return where the run continues.

    Errors where the checkpoint belongs to another model or data, lacks EMA weights the run needs,
    has trained more than ``cfg.epochs`` or was taken mid-epoch with another batch size; warns
    (where ``warn``) about changed options. ``streamed``: the training data is read from shards;
    ``shards``: their fingerprint now (:func:`~vitpos.data.shards.shard_fingerprint`), refused where it
    differs from the one the checkpoint recorded; ``classes``: the data's class names now, refused where they
    differ from those it was trained on (its labels would name other classes).
    """
    ckpt = load_training_checkpoint(path)
    check_same_model(ckpt.model_config, model_cfg, ckpt.path)
    trained_on = ckpt.train_config.get("data")  # a run of an earlier version may hold a relative path
    if (anchored_spec(trained_on) if isinstance(trained_on, str) else trained_on) != cfg.data:
        raise CheckpointError(
            f"checkpoint {ckpt.path} was trained on {trained_on!r}, not {cfg.data!r}; resume with the same --data"
        )
    load_weights(model, WeightsFile(ckpt.path, ckpt.weights, ckpt.metadata))
    if ema is not None:
        if ckpt.ema is None:
            raise CheckpointError(f"checkpoint {ckpt.path} has no EMA weights; resume with ema_decay=0")
        load_weights(ema, WeightsFile(ckpt.path, ckpt.ema, ckpt.metadata))
    state = ckpt.state
    assert state is not None  # load_training_checkpoint reads the state by default
    if shards is not None and "shards" in state:  # checkpoints written before shards were fingerprinted have none
        check_same_shards(state["shards"], shards, f"checkpoint {ckpt.path}")
    trained_classes = tuple(ckpt.data.get("classes") or ())
    if classes is not None and trained_classes != classes:
        first = next(i for i, pair in enumerate(itertools.zip_longest(trained_classes, classes)) if pair[0] != pair[1])
        then, now = (names[first] if first < len(names) else "none" for names in (trained_classes, classes))
        raise CheckpointError(
            f"the classes of {cfg.data} changed since checkpoint {ckpt.path} was written ({len(trained_classes)} "
            f"then, {len(classes)} now; class {first} was {then!r}, is {now!r}): its labels would name other "
            "classes. Put the data back as it was to resume, or start a new run on it (another --run-dir)"
        )
    if state["epoch"] > cfg.epochs:
        raise CheckpointError(
            f"checkpoint {ckpt.path} has already trained {state['epoch']} epochs, "
            f"more than epochs={cfg.epochs}; "
            f"a run cannot be shortened: resume with epochs >= {state['epoch']}, or evaluate it with `vitpos eval`"
        )
    cfg, kept = keep_stream_settings(cfg, ckpt.train_config, streamed)
    if warn:
        warn_changes(ckpt.train_config, cfg, ckpt.path)
    if state["batch"] and ckpt.train_config.get("batch_size") != cfg.batch_size:
        raise CheckpointError(
            f"checkpoint {ckpt.path} was taken mid-epoch with batch_size {ckpt.train_config.get('batch_size')}; "
            "resume with the same batch size"
        )
    return ResumePoint(
        path=ckpt.path,
        cfg=cfg,
        kept=kept,
        optimizer=state["optimizer"],
        epoch=state["epoch"],
        batch=state["batch"],
        step=state["step"],
        history=list(state["history"]),
        running=state["running"],
    )


def warn_changes(saved: dict[str, Any], cfg: TrainConfig, where: Path) -> None:
    """Warn about options that change what a resumed run computes (the schedule, the optimiser ...)."""
    now = cfg.to_dict()
    changed = [
        f"{k} {saved[k]!r} -> {now[k]!r}" for k in now if k not in BOOKKEEPING and k in saved and saved[k] != now[k]
    ]
    if changed:
        warnings.warn(
            f"resuming {where} with changed training options ({'; '.join(changed)}): the run continues from the "
            "checkpoint under the new values (a changed epochs or lr reshapes the rest of the schedule), so it "
            "will not match a run trained with either setting throughout",
            RunChangedWarning,
            stacklevel=2,
        )
