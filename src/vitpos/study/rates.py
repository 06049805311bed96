"""A fair learning rate per family and task: the best of a small grid on a validation split.

Each family's model trains each training task once per rate of :attr:`StudyConfig.lr_grid` and
seed of :attr:`StudyConfig.rate_seeds` (seeds no reported run uses), with the study's stopping
rule; the rate with the best mean validation metric over those seeds wins (ties: fewer mean steps,
then the smaller rate), so a rate at which one seed's run happens to stay at chance is not chosen by
another seed's luck. A pretrained family uses the rates of its model trained from scratch, chosen before its
encoding is pretrained. The choices and every score are kept in ``rates.json``. A grid of one rate
trains no trial (:func:`only_rate`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files import write_json
from .cells import Cell
from .execute import TRAINS_AS
from .families import Family
from .protocol import TASKS, StudyConfig

__all__ = ["RATES_FILE", "rate_key", "rate_trials", "only_rate", "choose", "mean_scores", "Rates"]

RATES_FILE = "rates.json"
TRAINING_TASKS = tuple(dict.fromkeys(TRAINS_AS.get(t, t) for t in TASKS))
"""The tasks that train a model (a colour-shift cell reuses its absolute model)."""


def rate_key(family: Family) -> str:
    """Families that train the same model from scratch share a selection (``fourier_pretrained``: ``fourier``'s)."""
    plain = {k: v for k, v in family.to_dict().items() if k not in ("label", "pretrained")}
    return json.dumps(plain, sort_keys=True)


def rate_trials(config: StudyConfig) -> dict[str, tuple[Family, list[Cell]]]:
    """Per selection key: the family that trains it and its trial cells (one per training task)."""
    out: dict[str, tuple[Family, list[Cell]]] = {}
    for family in config.families:
        key = rate_key(family)
        if key not in out:
            out[key] = (
                family,
                [Cell(family.label, t, config.train_size, s) for s in config.rate_seeds for t in TRAINING_TASKS],
            )
    return out


def only_rate(config: StudyConfig) -> dict[str, dict[str, float]]:
    """Family label -> training task -> the rate of a grid of one (the rate its trials would have chosen,
    whatever their scores, so none trains), or ``lr`` where the grid is empty."""
    lr = config.lr_grid[0] if config.lr_grid else config.lr
    return {family.label: dict.fromkeys(TRAINING_TASKS, lr) for family in config.families}


def choose(scores: dict[float, dict[str, Any]]) -> float:
    """The rate with the best ``val`` (ties: fewer ``steps``, then the smaller rate)."""
    return min(scores, key=lambda lr: (-scores[lr]["val"], scores[lr]["steps"], lr))


def mean_scores(trials: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``val`` and ``steps`` averaged over one rate's trial seeds (seed -> result)."""
    return {k: sum(r[k] for r in trials.values()) / len(trials) for k in ("val", "steps")}


class Rates:
    """The selected rates of a study folder: ``rates.json``, filled as trials finish."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / RATES_FILE
        try:
            self.data: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            self.data = {}

    def has(self, key: str, task: str, lr: float, seed: int) -> bool:
        """Whether the trial of ``lr`` on ``task`` and ``seed`` for selection ``key`` has finished."""
        return str(seed) in self.data.get(key, {}).get(task, {}).get("trials", {}).get(str(lr), {})

    def add(self, key: str, label: str, task: str, lr: float, seed: int, result: dict[str, Any]) -> None:
        """Record one trial (its val metric, steps and stop reason) and save."""
        entry = self.data.setdefault(key, {"family": label}).setdefault(task, {"trials": {}})
        entry["trials"].setdefault(str(lr), {})[str(seed)] = {k: result[k] for k in ("val", "steps", "stop", "flagged")}
        write_json(self.path, self.data)

    def chosen(self, key: str, grid: tuple[float, ...], seeds: tuple[int, ...]) -> dict[str, float]:
        """Task -> the chosen rate, for the tasks whose whole grid has finished on every seed."""
        out = {}
        for task, entry in self.data.get(key, {}).items():
            if task == "family":
                continue
            trials = {
                float(lr): {s: r for s, r in by_seed.items() if int(s) in seeds}
                for lr, by_seed in entry["trials"].items()
                if float(lr) in grid
            }
            if len(trials) == len(grid) and all(len(t) == len(seeds) for t in trials.values()):
                out[task] = choose({lr: mean_scores(t) for lr, t in trials.items()})
        return out
