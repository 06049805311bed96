"""One training run of a study is a cell; each finished cell is one JSON file, so a study resumes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_json

__all__ = ["Cell", "CellStore", "UNTRAINED"]

UNTRAINED = 0
"""The training-set size of a cell that trains nothing: the table its runs start from is probed (a claim
about tables before training needs no training)."""


@dataclass(frozen=True, order=True)
class Cell:
    """A (family, task, training-set size, seed) combination."""

    family: str
    task: str
    train_size: int
    seed: int

    @property
    def name(self) -> str:
        """File stem inside the family's folder."""
        return f"{self.task}-n{self.train_size}-seed{self.seed}"

    def __str__(self) -> str:
        return f"{self.family} {self.task} n={self.train_size} seed {self.seed}"


class CellStore:
    """Finished cells under ``root/<family>/<task>-n<size>-seed<seed>.json``, written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, cell: Cell) -> Path:
        """Where the result of ``cell`` lives."""
        return self.root / cell.family / f"{cell.name}.json"

    def load(self, cell: Cell) -> dict[str, Any] | None:
        """The stored result, or None if the cell has not finished (a damaged file counts as unfinished)."""
        path = self.path(cell)
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def save(self, cell: Cell, result: dict[str, Any]) -> None:
        """Store ``result``; written atomically, so an interrupt leaves no half file."""
        write_json(self.path(cell), result, indent=None)
