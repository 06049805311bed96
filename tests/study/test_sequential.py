"""The study's decision rule by simulation: the interval's coverage at 5-20 seeds, and the chance of a
wrong-side verdict over all looks when the true mean sits on the bound, on the shapes of the study's
per-seed values (bounded accuracies near a bound or at the ceiling, R² with a long lower tail, paired
differences)."""

import numpy as np
import pytest

from vitpos.study.sequential import Sequential, skew_t_bounds, skew_t_interval
from vitpos.study.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_RUN, REPRODUCED, bootstrap_ci

RULE = Sequential((5, 10, 20))  # the default study's rounds
SAMPLES = 20_000


def _accuracy(mean: float, sd: float):
    """Accuracies in % as a scaled beta of this mean and spread (skewed towards 0 near 100%)."""
    m, v = mean / 100, (sd / 100) ** 2
    k = m * (1 - m) / v - 1
    return mean, lambda rng, size: 100 * rng.beta(m * k, (1 - m) * k, size=size)


def _r2(mean: float, sd: float):
    """R² as 1 minus a gamma: at most 1, with a long lower tail (a seed that learned the offset badly)."""
    gap = 1 - mean
    return mean, lambda rng, size: 1 - rng.gamma((gap / sd) ** 2, sd**2 / gap, size=size)


def _difference(sd: float):
    """A paired difference of two accuracies of the same spread (symmetric, bounded)."""
    _, draw = _accuracy(80.0, sd)
    return 0.0, lambda rng, size: draw(rng, size) - draw(rng, size)


SHAPES = {
    # the spreads the study measured: left/right probes (sd ~5), accuracies below a colour shift (sd ~10),
    # the ceiling of solved tasks, the offset R² (sd 0.1-0.2), probe R² near 1, paired differences, heavy tails
    "accuracy 90 ± 5": _accuracy(90.0, 5.0),
    "accuracy 90 ± 10 (J-shaped)": _accuracy(90.0, 10.0),
    "accuracy 60 ± 8": _accuracy(60.0, 8.0),
    "accuracy 99.5 ± 0.4 (ceiling)": _accuracy(99.5, 0.4),
    "R² 0.8 ± 0.1": _r2(0.8, 0.1),
    "R² 0.8 ± 0.2": _r2(0.8, 0.2),
    "R² 0.95 ± 0.03": _r2(0.95, 0.03),
    "difference of accuracies ± 10": _difference(10.0),
    "normal": (0.0, lambda rng, size: rng.normal(0.0, 1.0, size)),
    "Student t, 3 df": (0.0, lambda rng, size: rng.standard_t(3, size)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_intervals_of_all_looks_cover_the_mean_together_at_95_percent(shape):
    mean, draw = SHAPES[shape]
    x = draw(np.random.default_rng(0), (SAMPLES, RULE.rounds[-1]))
    together = np.ones(SAMPLES, dtype=bool)
    for seeds in RULE.rounds:
        low, high = skew_t_bounds(x[:, :seeds], RULE.level)
        covered = (low <= mean) & (mean <= high)
        assert covered.mean() >= 0.95, f"{shape}: {covered.mean():.3f} at {seeds} seeds"
        together &= covered
    assert together.mean() >= 0.95, f"{shape}: {together.mean():.3f} over all looks"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_wrong_side_verdict_over_all_looks_has_a_chance_of_at_most_5_percent(shape):
    bound, draw = SHAPES[shape]  # the true mean sits on the bound: any verdict is on the wrong side
    x = draw(np.random.default_rng(1), (SAMPLES, RULE.rounds[-1]))
    decided = np.zeros(SAMPLES, dtype=bool)
    for seeds in RULE.rounds:
        low, high = skew_t_bounds(x[:, :seeds], RULE.level)
        decided |= (low > bound) | (high < bound)
    assert decided.mean() <= RULE.alpha, f"{shape}: {decided.mean():.4f}"


def test_the_simulated_rule_is_the_judge_s_rule():
    bound, draw = SHAPES["R² 0.8 ± 0.2"]
    rng = np.random.default_rng(2)
    x = draw(rng, (300, 20)) + rng.normal(0.0, 0.15, (300, 1))  # some samples off the bound, so some decide
    decided, first = np.zeros(300, dtype=bool), np.zeros(300, dtype=int)
    for look, seeds in enumerate(RULE.rounds, start=1):
        low, high = skew_t_bounds(x[:, :seeds], RULE.level)
        now = ((low > bound) | (high < bound)) & ~decided
        first[now], decided = look, decided | now
    judged = 0
    for row, decides, look in zip(x, decided, first, strict=True):
        verdict = RULE.judge(dict(enumerate(row)), ">", bound)
        if verdict.outcome != INCONCLUSIVE:
            assert decides and verdict.round == look
            judged += 1
        else:  # undecided at every look, or stopped early as hopeless before the look that would have decided
            assert not decides or (verdict.no_effect and verdict.round < look)
    assert 30 < judged < 270  # the simulation counts every look, so its rate bounds the judge's


def test_the_old_percentile_bootstrap_under_covers_at_five_seeds():
    # why the interval changed: 5 normal seeds, the 95% percentile bootstrap of the mean covers ~84%
    rng = np.random.default_rng(3)
    covered = [lo <= 0 <= hi for lo, hi in (bootstrap_ci(rng.normal(size=5), resamples=400) for _ in range(400))]
    assert 0.75 < np.mean(covered) < 0.9
    low, high = skew_t_bounds(rng.normal(size=(4000, 5)), 0.95)
    assert 0.94 < np.mean((low <= 0) & (high >= 0)) < 0.96  # the t interval at its level (no skew to correct)


def test_the_interval_is_the_t_interval_for_symmetric_values_and_leans_with_skew():
    low, high = skew_t_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.95)
    assert (low, high) == pytest.approx((3 - 2.776 * 1.5811 / 5**0.5, 3 + 2.776 * 1.5811 / 5**0.5), abs=1e-3)
    low, high = skew_t_interval([100.0, 100.0, 100.0, 99.0, 90.0], 0.95)  # a long lower tail
    assert 97.8 - low > high - 97.8  # the interval reaches further towards the tail
    assert skew_t_interval([3.0, 3.0, 3.0], 0.95) == (3.0, 3.0)
    assert np.isnan(skew_t_interval([3.0], 0.95)).all()


def test_a_claim_is_decided_at_its_first_deciding_look_and_failed_seeds_are_left_out():
    values = {s: 100.0 - (s % 5) for s in range(10)}
    first = RULE.judge(values, ">", 90.0)
    assert (first.outcome, first.round, first.n) == (REPRODUCED, 1, 5)  # later seeds are not looked at
    chance = {**{s: 100.0 for s in range(4)}, 4: 50.0}
    assert RULE.judge(chance, ">", 90.0).outcome == INCONCLUSIVE
    left_out = RULE.judge(chance, ">", 90.0, failed={4})
    assert (left_out.outcome, left_out.n, left_out.failed) == (REPRODUCED, 4, 1)
    assert RULE.judge({s: 70.0 + s % 3 for s in range(5)}, ">", 90.0).outcome == CONTRADICTED
    assert RULE.judge({}, ">", 90.0).outcome == NOT_RUN


def test_an_undecided_claim_gets_the_next_round_and_a_hopeless_one_stops_early():
    spread = [-1.0, 1.0, -2.0, 2.0, 0.5]
    near = RULE.judge({s: 1.5 + v for s, v in enumerate(spread)}, ">", 0.0)
    assert near.outcome == INCONCLUSIVE and 5 < near.seeds_needed <= 20 and RULE.open(near)
    far = RULE.judge({s: 0.05 + v for s, v in enumerate(spread)}, ">", 0.0)
    assert far.no_effect and far.seeds_needed > 40 and not RULE.open(far)  # no effect at this spread (2 × 20)
    more = {s: 1.5 + spread[s % 5] * (1 + s / 50) for s in range(10)}
    assert RULE.judge(more, ">", 0.0).round == 2  # the second round ran: its look is taken
    third = RULE.judge({s: 1.1 + spread[s % 5] for s in range(20)}, ">", 0.0)
    assert (third.outcome, third.round, third.n) == (REPRODUCED, 3, 20)
    wider = RULE.judge({s: 1.1 + spread[s % 5] * (1.5 if s >= 10 else 1) for s in range(20)}, ">", 0.0)
    assert (wider.outcome, wider.round) == (INCONCLUSIVE, 3) and not RULE.open(wider)  # no round after the last


def test_the_rounds_must_grow():
    for rounds in ((), (5, 5), (10, 5), (0, 5)):
        with pytest.raises(ValueError, match="rounds must be increasing"):
            Sequential(rounds)


@pytest.mark.parametrize("shape", ["difference of accuracies ± 10", "normal", "Student t, 3 df", "R² 0.8 ± 0.2"])
def test_a_gain_on_its_smallest_claimed_size_is_contradicted_at_most_2_5_percent_of_the_time(shape):
    centre, draw = SHAPES[shape]  # the true gain sits on the bound moved by the margin
    x = draw(np.random.default_rng(4), (SAMPLES, RULE.rounds[-1]))
    margin = 2 * x.std()  # a claimed gain of two spreads
    bound = centre - margin  # the claim: gain > bound; contradicted below bound + margin = the true mean
    contradicted, reproduced = np.zeros(SAMPLES, dtype=bool), np.zeros(SAMPLES, dtype=bool)
    for seeds in RULE.rounds:
        low, high = skew_t_bounds(x[:, :seeds], RULE.level)
        contradicted |= high < bound + margin
        reproduced |= low > bound
    assert contradicted.mean() <= RULE.alpha / 2, f"{shape}: {contradicted.mean():.4f}"
    assert reproduced.mean() > 0.5  # a true gain of the claimed size is mostly found by the last look


def test_a_margin_turns_an_absent_gain_into_a_contradiction_and_keeps_a_small_real_one():
    rng = np.random.default_rng(5)
    absent = dict(enumerate(rng.normal(0.0, 0.3, 5)))
    assert RULE.judge(absent, ">", 0.0).outcome == INCONCLUSIVE  # without a margin: never decided
    assert RULE.judge(absent, ">", 0.0, margin=2.0).outcome == CONTRADICTED
    small = {s: 1.0 + v for s, v in absent.items()}  # a gain of 1: below the margin, but credibly above 0
    assert RULE.judge(small, ">", 0.0, margin=2.0).outcome == REPRODUCED
    # "< 60" with a margin of 5 implies at most 55: contradicted when credibly above 55
    straddling = {s: 59.95 + v for s, v in absent.items()}
    assert RULE.judge(straddling, "<", 60.0).outcome == INCONCLUSIVE
    assert RULE.judge(straddling, "<", 60.0, margin=5.0).outcome == CONTRADICTED
    assert RULE.judge({s: 54.0 + v for s, v in absent.items()}, "<", 60.0, margin=5.0).outcome == REPRODUCED
    undecided = RULE.judge({s: 1.0 + 3 * v for s, v in absent.items()}, ">", 0.0, margin=2.0)
    assert undecided.outcome == INCONCLUSIVE and undecided.seeds_needed is not None
