"""Training curves for TensorBoard (``log="tensorboard"``, ``--log tensorboard``), beside the CSV and JSONL.

Each epoch's row of :mod:`.records` (losses, metrics, learning rate, throughput) goes to
``RUN/tensorboard/`` as scalars at the row's optimiser step, through
:class:`torch.utils.tensorboard.SummaryWriter`; the ``tensorboard`` package is optional.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["LOGS", "BOARD_FOLDER", "tensorboard_missing", "log_epoch"]

LOGS = ("csv", "tensorboard")
"""``csv``: metrics.csv and metrics.jsonl only (always written); ``tensorboard``: TensorBoard too."""
BOARD_FOLDER = "tensorboard"
"""The event files' folder in a run folder."""


def tensorboard_missing() -> bool:
    """Whether the ``tensorboard`` package cannot be imported."""
    return importlib.util.find_spec("tensorboard") is None


def log_epoch(run_dir: Path, row: dict[str, Any], log: str) -> None:
    """Add one epoch's numbers to the run's TensorBoard events when ``log`` is ``tensorboard``."""
    if log != "tensorboard":
        return
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / BOARD_FOLDER))
    try:
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)):
                writer.add_scalar(key, value, global_step=row["step"])
    finally:
        writer.close()
