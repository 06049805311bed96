"""The red-green study's decision rule: a skew-corrected t interval, seeds added in rounds, a stated error rate.

A claim is tested on per-seed values at a few *looks*: after the first round of seeds, and again
after each later round (the seeds doubled) while it is still undecided, up to the last round. Each
look computes Hall's skewness-corrected Student-t interval of the mean (Hall 1992, "On the removal
of skewness by transformation": the t statistic passed through a monotone cubic that removes its
first-order skewness, so bounded, skewed per-seed values such as accuracies near 100% or R² near 1
keep their level) at a per-look level of 1 - alpha / (3 × looks): Bonferroni over the looks, with a
factor 3 in reserve for the level the corrected interval still loses at 5 seeds on a skewed shape.
A claim is reproduced at its first look whose interval lies wholly on its side of its bound, and
contradicted at the first whose interval lies wholly on the other side of the bound moved by the
claim's margin: the smallest effect the claim implies, so a claimed gain is contradicted when it is
credibly smaller than that (no margin: the bound itself). The chance of a wrong-side verdict when the
true mean sits on the bound, or on the moved bound, is at most alpha over all looks together
(``tests/study/test_sequential.py`` checks the interval's coverage and this rate by simulation on the
study's shapes). A look that would need more than twice the last round's seeds to decide, if the
spread held, stops the claim early: "no effect at this spread".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats  # type: ignore[import-untyped]  # scipy ships no stubs here

from .verdicts import CONTRADICTED, INCONCLUSIVE, NOT_RUN, REPRODUCED, Verdict

__all__ = ["ALPHA", "RESERVE", "SLACK", "skew_t_bounds", "skew_t_interval", "Sequential"]

ALPHA = 0.05
"""The largest chance of a wrong-side verdict, over all looks, when the true mean sits on the bound."""
RESERVE = 3
"""Bonferroni's per-look alpha is divided by this too: the simulation's margin for skewed shapes."""
SLACK = 2
"""A claim stops early only when its estimate of the seeds it needs exceeds this many times the last round's:
the estimate rests on the spread of a few seeds (at 5 seeds the standard deviation's 90% interval spans about
0.6 to 2.4 times its estimate). Stopping early saves runs; it does not change the error rate."""


def skew_t_bounds(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Hall's skewness-corrected t interval of the mean of each row of ``x`` (rows: samples of n values)."""
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    sd = x.std(axis=-1, ddof=1)
    safe = np.where(sd > 0, sd, 1.0)
    skew = ((x - mean[..., None]) ** 3).mean(axis=-1) / safe**3
    q = stats.t.ppf(1 - (1 - level) / 2, n - 1)
    b, c = skew / (3 * math.sqrt(n)), skew / (6 * math.sqrt(n))

    def inverse(y: float) -> np.ndarray:
        # g(T) = T + b T^2 + b^2 T^3 / 3 + c = ((1 + b T)^3 - 1) / (3 b) + c, monotone in T
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (np.cbrt(1 + 3 * b * (y - c)) - 1) / b
        return np.where(np.abs(b) < 1e-12, y - c, out)

    se = sd / math.sqrt(n)
    return mean - se * inverse(q), mean - se * inverse(-q)


def skew_t_interval(values: Iterable[float], level: float) -> tuple[float, float]:
    """Hall's skewness-corrected t interval of the mean of ``values`` (NaN, NaN for fewer than two)."""
    data = np.asarray(list(values), dtype=float)
    if data.size < 2:
        return math.nan, math.nan
    low, high = skew_t_bounds(data[None, :], level)
    return float(low[0]), float(high[0])


@dataclass(frozen=True)
class Sequential:
    """Looks after each round of seeds (``rounds``: the seeds run by the end of each round, ascending)."""

    rounds: tuple[int, ...]
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if not self.rounds or list(self.rounds) != sorted(set(self.rounds)) or self.rounds[0] < 1:
            raise ValueError(f"rounds must be increasing seed counts >= 1, got {self.rounds}")

    @property
    def limit(self) -> int:
        """The seed count beyond which an undecided claim stops early as "no effect at this spread"."""
        return SLACK * self.rounds[-1]

    @property
    def level(self) -> float:
        """Each look's interval level: 1 - alpha / (RESERVE × looks)."""
        return 1 - self.alpha / (RESERVE * len(self.rounds))

    def interval(self, values: list[float]) -> tuple[float, float]:
        """The interval of one look."""
        return skew_t_interval(values, self.level)

    def seeds_needed(self, values: list[float], gap: float) -> int | None:
        """Seeds at which the spread of ``values`` would decide a mean ``gap`` from a threshold (None: no estimate)."""
        n, sd = len(values), float(np.std(values, ddof=1))
        if gap <= 0 or sd == 0:
            return None
        # the t interval's half-width q(m) sd / sqrt(m) falls below the gap; beyond 100 times: effectively never
        for m in range(n + 1, 100 * max(n, self.rounds[-1])):
            if stats.t.ppf(1 - (1 - self.level) / 2, m - 1) * sd / math.sqrt(m) < gap:
                return m
        return 100 * max(n, self.rounds[-1])

    def look(self, values: list[float], side: str, bound: float, margin: float = 0.0) -> Verdict:
        """One look at ``values`` (the seeds that trained, up to this round): reproduced when the interval lies
        wholly on ``side`` of ``bound``, contradicted when it lies wholly on the other side of ``bound`` moved
        ``margin`` towards ``side`` (the smallest effect the claim implies; 0: the bound itself)."""
        n = len(values)
        if n == 0:
            return Verdict(NOT_RUN, 0)
        mean = float(np.mean(values))
        low, high = self.interval(values)
        if n == 1:
            return Verdict(INCONCLUSIVE, 1, mean, low, high, None, limit=self.limit)
        sign = 1.0 if side == ">" else -1.0
        beyond = bound + sign * margin
        near, far = (low, high) if side == ">" else (-high, -low)  # the interval as if the claim were ">"
        if near > sign * bound:
            return Verdict(REPRODUCED, n, mean, low, high, limit=self.limit)
        if far < sign * beyond:
            return Verdict(CONTRADICTED, n, mean, low, high, limit=self.limit)
        gap = max(sign * (mean - bound), sign * (beyond - mean))
        return Verdict(INCONCLUSIVE, n, mean, low, high, self.seeds_needed(values, gap), limit=self.limit)

    def judge(
        self,
        values: dict[int, float],
        side: str,
        bound: float,
        failed: frozenset[int] | set[int] = frozenset(),
        margin: float = 0.0,
    ) -> Verdict:
        """The verdict at the first deciding look over the seeds run (``failed`` seeds left out), with its round."""
        if side not in (">", "<"):
            raise ValueError(f"side must be '>' or '<', got {side!r}")
        verdict = Verdict(NOT_RUN, 0)
        for i, seeds in enumerate(self.rounds):
            if i and not any(self.rounds[i - 1] <= s < seeds for s in values):
                break  # this round has not run for the claim
            run = [s for s in sorted(values) if s < seeds]
            kept = [values[s] for s in run if s not in failed]
            verdict = self.look(kept, side, bound, margin)
            verdict = verdict.with_round(i + 1, len(run) - len(kept))
            if verdict.outcome != INCONCLUSIVE or verdict.no_effect:
                break
        return verdict

    def open(self, verdict: Verdict) -> bool:
        """Whether a claim with ``verdict`` gets the next round's seeds."""
        return verdict.outcome == INCONCLUSIVE and not verdict.no_effect and verdict.round < len(self.rounds)
