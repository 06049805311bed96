"""Verdicts from constructed per-seed values: reproduced, contradicted, inconclusive, not run."""

import dataclasses
import math

import numpy as np
import pytest

from vitpos.study.cells import Cell
from vitpos.study.claims import CLAIMS, evaluate_claims
from vitpos.study.figures import paper_value
from vitpos.study.sections import verdict_table
from vitpos.study.sequential import Sequential
from vitpos.study.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    NO_EFFECT,
    NOT_RUN,
    REPRODUCED,
    bootstrap_ci,
    judge,
)


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(1)
    few, many = rng.normal(50, 10, 5), rng.normal(50, 10, 80)
    low, high = bootstrap_ci(few)
    assert low < few.mean() < high
    wide, narrow = high - low, np.subtract(*bootstrap_ci(many)[::-1])
    assert narrow < wide / 2
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)


@pytest.mark.parametrize(
    "values,side,bound,outcome",
    [
        ([99.0, 98.5, 99.5, 100.0, 97.0], ">", 90.0, REPRODUCED),
        ([99.0, 98.5, 99.5, 100.0, 97.0], "<", 90.0, CONTRADICTED),
        ([52.0, 55.0, 49.0, 51.0, 58.0], "<", 60.0, REPRODUCED),
        ([52.0, 55.0, 49.0, 51.0, 58.0], ">", 60.0, CONTRADICTED),
        ([100.0, 50.0, 100.0, 50.0, 100.0], ">", 90.0, INCONCLUSIVE),
        ([0.2, -0.1, 0.3, -0.2, 0.1], ">", 0.0, INCONCLUSIVE),
    ],
)
def test_the_interval_decides(values, side, bound, outcome):
    verdict = judge(values, side, bound)
    assert verdict.outcome == outcome and verdict.n == 5
    assert verdict.low <= verdict.mean <= verdict.high
    assert (verdict.seeds_needed is not None) == (outcome == INCONCLUSIVE and verdict.mean != bound)


def test_seeds_needed_decide_when_the_spread_holds():
    noise = np.array([-1.5, -0.5, 0.0, 0.5, 1.5])
    verdict = judge(list(1.4 + noise), ">", 1.0)
    assert verdict.outcome == INCONCLUSIVE
    needed = verdict.seeds_needed
    assert 5 < needed < 200
    tiled = np.tile(1.4 + noise, math.ceil(2 * needed / 5))  # same spread, more seeds
    assert judge(list(tiled), ">", 1.0).outcome == REPRODUCED


def test_edge_cases():
    assert judge([], ">", 0.0).outcome == NOT_RUN
    single = judge([99.0], ">", 90.0)
    assert single.outcome == INCONCLUSIVE and single.seeds_needed is None  # one seed shows no spread
    assert judge([float("nan"), 95.0, 96.0, 97.0], ">", 90.0).n == 3
    with pytest.raises(ValueError, match="side must be"):
        judge([1.0], ">=", 0.0)


def test_claims_read_cells_and_pair_seeds():
    results = {}
    for seed in range(4):
        results[Cell("sincos2d", "direction", 100, seed)] = {"test": 0.9 + 0.01 * seed}
        results[Cell("learned", "direction", 100, seed)] = {"test": 0.6}
        results[Cell("learned", "direction", 1000, seed)] = {"test": 1.0}
    results[Cell("fourier", "direction", 100, 0)] = {"test": 0.5}
    judged = {
        c.quantity: (v, verdict)
        for c, v, verdict in evaluate_claims(results, 1000, (32,), {"sincos2d", "learned", "fourier"})
    }
    values, verdict = judged["sincos2d - learned, smallest set, points"]
    assert values == pytest.approx({0: 30.0, 1: 31.0, 2: 32.0, 3: 33.0}) and verdict.outcome == REPRODUCED
    values, verdict = judged["sincos2d - fourier, smallest set, points"]
    assert values == pytest.approx({0: 40.0}) and verdict.outcome == INCONCLUSIVE
    assert judged["learned direction acc %"][1].outcome == REPRODUCED
    assert judged["sincos2d distance R²"][1].outcome == NOT_RUN
    assert "peg - learned direction acc at the largest size, points" not in judged  # peg was not in the study
    assert len({c.quantity for c in CLAIMS}) == len(CLAIMS)


def test_an_absurd_seed_count_reads_no_effect_at_this_spread():
    verdict = judge([60.0, 40.0, 55.0, 45.0, 50.2], ">", 50.0)
    assert verdict.outcome == INCONCLUSIVE and verdict.seeds_needed > NO_EFFECT * 5 and verdict.no_effect
    assert "no effect at this spread" in verdict_table([(CLAIMS[0], {}, verdict)])
    close = judge([96.0, 86.0, 99.0, 84.0, 97.0], ">", 90.0)
    assert close.outcome == INCONCLUSIVE and not close.no_effect


@pytest.mark.parametrize(
    "paper,quantity,value",
    [
        ("99.43 ± 0.36", "learned direction acc %", 99.43),
        ("0.92 ± 0.06", "learned distance R²", 0.92),
        ("92 -> 99", "fourier_pretrained - fourier left-right probe before, points", 7.0),
        ("0.91 -> 0.98", "fourier_pretrained - fourier offset probe R² before", 0.07),
        ("+2.0 (384 px, Ti)", "peg - learned direction acc at the largest size, points", 2.0),
        ("higher curve (figure)", "sincos2d - learned, smallest set, points", None),
        ("≥ 0 (DeiT-S, ImageNet)", "irpe_product - learned direction acc, points", None),
    ],
)
def test_the_papers_value_is_read_where_it_prints_one(paper, quantity, value):
    claim = dataclasses.replace(CLAIMS[0], paper=paper, quantity=quantity)
    assert paper_value(claim) == (None if value is None else pytest.approx(value))


def test_claimed_gains_carry_the_smallest_gain_they_imply_and_say_it():
    margins = {c.statement: c.margin for c in CLAIMS if c.margin}
    assert margins == {
        "sinusoidal beats learned with the fewest images (direction)": 2.0,
        "sinusoidal beats fourier with the fewest images (direction)": 2.0,
        "sinusoidal beats learned with the fewest images (distance)": 0.02,
        "sinusoidal beats fourier with the fewest images (distance)": 0.02,
        "a learned table learns the upper/lower split": 0.02,
        "a fourier table learns the upper/lower split": 0.02,
        "pretraining raises the Fourier table's left/right probe": 3.5,  # half of 92 -> 99
        "pretraining raises the Fourier table's offset probe": pytest.approx(0.035),  # half of 0.91 -> 0.98
        "a PEG beats a learned table at a larger unseen resolution": 1.0,  # half of CPVT's +2.0
    }
    peg = next(c for c in CLAIMS if c.statement.startswith("a PEG"))
    assert peg.test == "interval of the mean over seeds > 0; contradicted < 1"
    results = {
        Cell(f, "direction", 1000, s): {"resolution": {"96": acc}}
        for s in range(5)
        for f, acc in (("peg", 0.8), ("learned", 0.8 - s / 1e3))
    }
    ((_, _, verdict),) = evaluate_claims(results, 1000, (48, 96), {"peg", "learned"}, (peg,), rule=Sequential((5,)))
    assert verdict.outcome == CONTRADICTED  # a gain of 0.2 ± 0.16 points: credibly below the claimed 1
