"""From per-seed values to a verdict, and the one-look test of the dense studies: a bootstrap interval.

The red-green study decides by the sequential rule of :mod:`.sequential` (seeds in rounds, a
skew-corrected t interval at each look), which reports the same :class:`Verdict`. The dense studies
(:mod:`.dense`) decide in one look with :func:`judge`:

A claim says that a quantity lies above (``>``) or below (``<``) a bound. The claim is
*reproduced* when the whole 95% interval lies on its side of the bound, *contradicted* when the
whole interval lies on the other side, and *inconclusive* otherwise; then the number of seeds that
would decide it is estimated from the interval's width, which shrinks as one over the square root
of the number of seeds (beyond :data:`NO_EFFECT` times the seeds run, the claim reads "no effect
at this spread"). A claim that is not reproduced while some of its seeds rest on flagged runs
(:mod:`.convergence`) is *not converged*: an optimisation failure, not a finding about the encoding.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "REPRODUCED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "NOT_CONVERGED",
    "NOT_RUN",
    "OUTCOMES",
    "NO_EFFECT",
    "Verdict",
    "bootstrap_ci",
    "judge",
    "unconverged",
]

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = "reproduced", "contradicted", "inconclusive", "not run"
NOT_CONVERGED = "not converged"
OUTCOMES = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_CONVERGED, NOT_RUN)
"""Every verdict, in the order the report counts them."""
NO_EFFECT = 10
"""An inconclusive claim that would need more than this many times its seeds shows no effect at this spread."""
RESAMPLES = 10_000
"""Bootstrap resamples per interval."""


def bootstrap_ci(
    values: Sequence[float], level: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampling seeds with replacement)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("a confidence interval needs at least one value")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim's test."""

    outcome: str
    n: int
    """Seeds that entered the test."""
    mean: float = math.nan
    low: float = math.nan
    high: float = math.nan
    seeds_needed: int | None = None
    """For an inconclusive claim: seeds that would likely decide it (None: no estimate, e.g. one
    seed, or a mean on the bound)."""
    flagged: int = 0
    """Seeds whose value rests on a flagged run (at the cap, or at chance)."""
    limit: int | None = None
    """The most seeds the rule would run (None: :data:`NO_EFFECT` times the seeds run)."""
    round: int = 1
    """The look (round of seeds) the verdict was reached at."""
    failed: int = 0
    """Seeds left out as their run stopped short while other seeds' runs learned the task."""

    @property
    def no_effect(self) -> bool:
        """Inconclusive, and deciding it would take more seeds than :attr:`limit`."""
        limit = NO_EFFECT * self.n if self.limit is None else self.limit
        return self.outcome == INCONCLUSIVE and self.seeds_needed is not None and self.seeds_needed > limit

    def with_round(self, round: int, failed: int) -> Verdict:
        """This verdict as reached at look ``round`` with ``failed`` seeds left out."""
        return dataclasses.replace(self, round=round, failed=failed)

    def to_dict(self) -> dict:
        """Plain dict, for JSON."""
        return {
            "outcome": self.outcome,
            "n": self.n,
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "seeds_needed": self.seeds_needed,
            "flagged": self.flagged,
            "round": self.round,
            "failed": self.failed,
        }


def judge(values: Sequence[float], side: str, bound: float, level: float = 0.95) -> Verdict:
    """Test "mean ``side`` ``bound``" (``side`` is ``>`` or ``<``) on per-seed ``values``."""
    if side not in (">", "<"):
        raise ValueError(f"side must be '>' or '<', got {side!r}")
    data = [float(v) for v in values if v is not None and not math.isnan(v)]
    n = len(data)
    if n == 0:
        return Verdict(NOT_RUN, 0)
    mean = float(np.mean(data))
    low, high = bootstrap_ci(data, level)
    if n == 1:  # one seed says nothing about the spread
        return Verdict(INCONCLUSIVE, 1, mean, low, high, None)
    above, below = low > bound, high < bound
    if above or below:
        holds = above if side == ">" else below
        return Verdict(REPRODUCED if holds else CONTRADICTED, n, mean, low, high)
    gap = abs(mean - bound)
    half = (high - low) / 2
    needed = None if gap == 0 else max(n + 1, math.ceil(n * (half / gap) ** 2))
    return Verdict(INCONCLUSIVE, n, mean, low, high, needed)


def unconverged(verdict: Verdict, flagged: int) -> Verdict:
    """``verdict`` with ``flagged`` seeds on flagged runs: *not converged* unless it is reproduced."""
    if not flagged or verdict.outcome in (REPRODUCED, NOT_RUN):
        return dataclasses.replace(verdict, flagged=flagged)
    return dataclasses.replace(verdict, outcome=NOT_CONVERGED, seeds_needed=None, flagged=flagged)
