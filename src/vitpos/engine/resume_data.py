"""On resume, keep the data-loading settings that decide which samples form each batch.

A run that streams shards orders each epoch's samples through a shuffle buffer of
``shuffle_buffer`` samples: another buffer size gives other batches, and the resumed run would
not be the run that was stopped. The saved value is kept instead (with a log line saying so). The
number of loading workers and of processes changes nothing (:mod:`vitpos.data.shard_stream`) and
may change freely.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import TrainConfig

__all__ = ["STREAM_SETTINGS", "keep_stream_settings"]

STREAM_SETTINGS = ("shuffle_buffer",)
"""The options that decide a shard stream's batches."""


def keep_stream_settings(cfg: TrainConfig, saved: dict[str, Any], streamed: bool) -> tuple[TrainConfig, str | None]:
    """``cfg`` with the saved :data:`STREAM_SETTINGS` where the data is ``streamed`` and they differ, and the line
    that says so (None when nothing changed)."""
    if not streamed:
        return cfg, None
    now = cfg.to_dict()
    changed = {k: saved[k] for k in STREAM_SETTINGS if k in saved and saved[k] != now[k]}
    if not changed:
        return cfg, None
    told = ", ".join(f"{k.replace('_', '-')} {now[k]}" for k in changed)
    kept = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in changed.items())
    line = (
        f"resuming with the run's saved {kept} instead of {told}: with shards it decides which samples form each "
        "batch, so the resumed run makes the batches the stopped one would have made"
    )
    return dataclasses.replace(cfg, **changed), line
