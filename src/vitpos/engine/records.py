"""What a run leaves in its folder besides checkpoints: the resolved config, metrics, a summary.

``config.yaml``    the model and training configs, complete (load it with ``--config``)
``metrics.jsonl``  one JSON object per epoch
``metrics.csv``    the same table as CSV
``summary.json``   final metrics (on the test split, or val where the data has none), parameter count,
                   wall time, and the facts the run printed before its first step

Metric files are rewritten whole from the run's history each epoch (and from the checkpoint's
history on resume), so an interrupted run never leaves duplicated or half-written rows.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ..config import HostConfig
from ..files import write_atomic
from ..weights.run_folder import CONFIG_FILE
from .config import TrainConfig

__all__ = ["run_config", "write_run_config", "write_history", "write_summary"]


def run_config(model_cfg: HostConfig, train_cfg: TrainConfig) -> dict[str, Any]:
    """The resolved configuration as ``config.yaml`` holds it (``vitpos train --config`` reads it back)."""
    return {"model": model_cfg.to_dict(), "train": train_cfg.to_dict()}


def write_run_config(run_dir: Path, model_cfg: HostConfig, train_cfg: TrainConfig, about: Sequence[str] = ()) -> None:
    """Write the fully resolved configuration, headed by ``about`` (the run's preamble) as comments."""
    header = "# resolved configuration of this run; reuse it with `vitpos train --config`\n"
    header += "".join(f"# {line}\n" for line in about)
    write_atomic(run_dir / CONFIG_FILE, header + yaml.safe_dump(run_config(model_cfg, train_cfg), sort_keys=False))


def write_history(run_dir: Path, history: list[dict[str, Any]]) -> None:
    """Rewrite ``metrics.jsonl`` and ``metrics.csv`` from the per-epoch rows."""
    write_atomic(run_dir / "metrics.jsonl", "".join(json.dumps(row) + "\n" for row in history))
    columns = list(dict.fromkeys(key for row in history for key in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    write_atomic(run_dir / "metrics.csv", buf.getvalue())


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json``."""
    write_atomic(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
