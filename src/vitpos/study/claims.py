"""The published claims a study tests, each as a per-seed quantity, a side and a bound.

Sources: the thesis (Zhang 2022: Tables 1-4, Fig. 3, Fig. 5, §5.1), CPVT's Table 2 (a PEG
generalises to unseen resolutions better than a learned table) and iRPE's conclusion that
relative encodings can replace absolute ones for classification. A claim that a model "learns"
a binary task reads as accuracy above 90%, "at chance" as below 60% (chance is 50%); a claim
that one encoding beats another is a paired difference (same seed, same data) above zero, and it is
contradicted only when the difference is credibly below the smallest gain the claim implies (its
:attr:`Claim.margin`: half the paper's printed gain, or :data:`FIGURE_GAIN` for a gain read off a figure).
Verdicts are computed by :class:`~.sequential.Sequential` (the red-green study) or
:func:`~.verdicts.judge` (one look); nothing here knows the outcome.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cells import UNTRAINED, Cell
from .convergence import LEARNED, has_learned, is_flagged, stopped_short
from .sequential import Sequential
from .verdicts import Verdict, judge, unconverged

__all__ = [
    "Claim",
    "CLAIMS",
    "LEARNS",
    "AT_CHANCE",
    "FIGURE_GAIN",
    "evaluate_claims",
    "open_claims",
    "flagged_seeds",
    "capped_seeds",
    "failed_seeds",
    "fmt_value",
]

Results = dict[Cell, dict[str, Any]]
PerSeed = dict[int, float]
Measure = Callable[[Results, int, tuple[int, ...]], PerSeed]
"""(results, full training size, evaluation resolutions) -> value per seed."""

LEARNS = LEARNED["acc1"]
"""Accuracy (%) above which a binary task counts as learned."""
AT_CHANCE = 60.0
"""Accuracy (%) below which a binary task counts as not learned (chance is 50%)."""
FIGURE_GAIN = {"points": 2.0, "R²": 0.02, "cosine": 0.02}
"""The smallest gain a claim read off a figure ("a higher curve", "a clear boundary") implies, per unit."""


@dataclass(frozen=True)
class Claim:
    """One published claim, as a test on a per-seed quantity."""

    source: str
    statement: str
    paper: str
    """The paper's number, as printed there."""
    quantity: str
    """What we measure, in words (with its unit)."""
    side: str
    bound: float
    measure: Measure
    families: tuple[str, ...]
    """Study families the quantity needs (a claim whose families were not run is "not run")."""
    rests_on: tuple[tuple[str, str, str], ...] = ()
    """The trained runs behind each seed's value: (family, task, ``full`` or ``smallest`` training
    set); a seed with a flagged run among them counts as flagged. Empty: no training (a probe at
    initialisation)."""
    measured_on: tuple[tuple[str, str, str], ...] = ()
    """The runs whose cells hold each seed's value, where they are not :attr:`rests_on` (a probe at
    initialisation reads the table of a cell's initial model)."""
    margin: float = 0.0
    """For a claimed gain: the smallest gain the claim implies (:data:`FIGURE_GAIN`, or half the gain the
    paper prints). The claim is contradicted when the interval lies wholly below ``bound + margin``: the
    gain, if any, is credibly smaller than the claim needs. 0: contradicted below the bound itself."""

    @property
    def trains(self) -> bool:
        """Whether a seed's value needs trained runs (no: it reads the tables runs start from, and the seeds
        of its later rounds are untrained cells, :data:`~.cells.UNTRAINED`)."""
        return bool(self.rests_on)

    @property
    def runs(self) -> tuple[tuple[str, str, str], ...]:
        """The (family, task, size) cells each seed's value comes from: what a seed of this claim costs."""
        return self.measured_on or self.rests_on

    @property
    def test(self) -> str:
        """The test, in words."""
        against = f"; contradicted {'<' if self.side == '>' else '>'} {self.contradicted_at:g}" if self.margin else ""
        return f"interval of the mean over seeds {self.side} {self.bound:g}{against}"

    @property
    def contradicted_at(self) -> float:
        """The bound moved by :attr:`margin` towards the claim's side: the interval wholly beyond it contradicts."""
        return self.bound + (self.margin if self.side == ">" else -self.margin)

    @property
    def percent(self) -> bool:
        """Whether the quantity is an accuracy in % (figures clip it to [0, 100])."""
        return self.quantity.endswith("%")


def _scale(task_or_key: str) -> float:
    return 1.0 if "distance" in task_or_key or task_or_key.endswith("r2") else 100.0


def metric(family: str, task: str, size: str = "full") -> Measure:
    """Test accuracy (%) or R² of ``family`` on ``task``; ``size`` "full" or "smallest" training set."""

    def measure(results: Results, full: int, _: tuple[int, ...]) -> PerSeed:
        sizes = sorted({c.train_size for c in results if c.family == family and c.task == task} - {UNTRAINED})
        n = full if size == "full" else (sizes[0] if sizes and sizes[0] < full else None)
        return {
            c.seed: _scale(task) * r["test"]
            for c, r in results.items()
            if c.family == family and c.task == task and c.train_size == n
        }

    return measure


def probe(family: str, task: str, stage: str, key: str) -> Measure:
    """A table probe (thesis Table 2) of the ``task`` model: accuracy (%) or R², ``before`` or ``after`` training
    (``before``: from trained cells and untrained ones alike, the same initial table for a seed)."""

    def measure(results: Results, full: int, _: tuple[int, ...]) -> PerSeed:
        sizes = {full, UNTRAINED} if stage == "before" else {full}
        return {
            c.seed: _scale(key) * r["probes"][stage][key]
            for c, r in results.items()
            if c.family == family and c.task == task and c.train_size in sizes and "probes" in r
        }

    return measure


def largest_resolution(family: str) -> Measure:
    """Direction accuracy (%) at the largest evaluation resolution, without fine-tuning."""

    def measure(results: Results, full: int, resolutions: tuple[int, ...]) -> PerSeed:
        px = str(max(resolutions)) if resolutions else None
        return {
            c.seed: 100.0 * r["resolution"][px]
            for c, r in results.items()
            if c.family == family and c.task == "direction" and c.train_size == full and px in r.get("resolution", {})
        }

    return measure


def half_contrast_gain(family: str) -> Measure:
    """Rise in the table's upper/lower contrast through training on absolute_colorshift (see ``execute``)."""

    def measure(results: Results, full: int, _: tuple[int, ...]) -> PerSeed:
        return {
            c.seed: r["half_contrast"]["after"] - r["half_contrast"]["before"]
            for c, r in results.items()
            if c.family == family and c.task == "absolute_colorshift" and c.train_size == full and "half_contrast" in r
        }

    return measure


def difference(a: Measure, b: Measure) -> Measure:
    """a - b, paired by seed (seeds measured in both)."""

    def measure(results: Results, full: int, resolutions: tuple[int, ...]) -> PerSeed:
        x, y = a(results, full, resolutions), b(results, full, resolutions)
        return {s: x[s] - y[s] for s in sorted(set(x) & set(y))}

    return measure


def _learns(source: str, family: str, task: str, paper: str, what: str) -> Claim:
    r2 = task == "distance"
    return Claim(
        source,
        f"{family} {what}",
        paper,
        f"{family} {task} {'R²' if r2 else 'acc %'}",
        ">",
        0.8 if r2 else LEARNS,
        metric(family, task),
        (family,),
        ((family, task, "full"),),
    )


def _fails(source: str, family: str, task: str, paper: str, what: str, bound: float = AT_CHANCE) -> Claim:
    r2 = task == "distance"
    return Claim(
        source,
        f"{family} {what}",
        paper,
        f"{family} {task} {'R²' if r2 else 'acc %'}",
        "<",
        bound,
        metric(family, task),
        (family,),
        ((family, task, "full"),),
    )


CLAIMS: tuple[Claim, ...] = (
    # Table 1: every position encoding solves the relative tasks; without one, nothing is learned
    *(
        _learns("thesis Table 1", f, "direction", p, "learns left/right")
        for f, p in (
            ("learned", "99.43 ± 0.36"),
            ("sincos2d", "99.81 ± 0.16"),
            ("fourier", "99.64 ± 0.32"),
            ("irpe_product", "99.92 ± 0.06"),
        )
    ),
    *(
        _learns("thesis Table 1", f, "distance", p, "learns the offset (R² > 0.8)")
        for f, p in (
            ("learned", "0.92 ± 0.06"),
            ("sincos2d", "0.96 ± 0.01"),
            ("fourier", "0.94 ± 0.03"),
            ("irpe_product", "0.84 ± 0.04"),
        )
    ),
    _fails("thesis Table 1", "none", "direction", "52.72 ± 1.08", "stays at chance on left/right"),
    # Table 2: what the table holds before and after training
    Claim(
        "thesis Table 2",
        "a sinusoidal table encodes left/right before training",
        "100.00",
        "sincos2d left-right probe before, %",
        ">",
        95.0,
        probe("sincos2d", "direction", "before", "left_right"),
        ("sincos2d",),
        measured_on=(("sincos2d", "direction", "full"),),
    ),
    Claim(
        "thesis Table 2",
        "a sinusoidal table encodes the offset before training",
        "1.0",
        "sincos2d offset probe R² before",
        ">",
        0.95,
        probe("sincos2d", "distance", "before", "distance_r2"),
        ("sincos2d",),
        measured_on=(("sincos2d", "distance", "full"),),
    ),
    Claim(
        "thesis Table 2",
        "a Fourier table has a relative bias before training",
        "92.41",
        "fourier left-right probe before, %",
        ">",
        80.0,
        probe("fourier", "direction", "before", "left_right"),
        ("fourier",),
        measured_on=(("fourier", "direction", "full"),),
    ),
    Claim(
        "thesis Table 2",
        "a learned table has no relative bias before training",
        "51.47",
        "learned left-right probe before, %",
        "<",
        AT_CHANCE,
        probe("learned", "direction", "before", "left_right"),
        ("learned",),
        measured_on=(("learned", "direction", "full"),),
    ),
    Claim(
        "thesis Table 2",
        "a learned table learns left/right from the direction task",
        "99.99",
        "learned left-right probe after, %",
        ">",
        LEARNS,
        probe("learned", "direction", "after", "left_right"),
        ("learned",),
        (("learned", "direction", "full"),),
    ),
    Claim(
        "thesis Table 2",
        "... but not up/down, which the task lacks",
        "49.61",
        "learned up-down probe after, %",
        "<",
        AT_CHANCE,
        probe("learned", "direction", "after", "up_down"),
        ("learned",),
        (("learned", "direction", "full"),),
    ),
    # Fig. 3: the sinusoidal table is the most data-efficient
    *(
        Claim(
            "thesis Fig. 3",
            f"sinusoidal beats {other} with the fewest images ({task})",
            "higher curve (figure)",
            f"sincos2d - {other}, smallest set, {'R²' if task == 'distance' else 'points'}",
            ">",
            0.0,
            difference(metric("sincos2d", task, "smallest"), metric(other, task, "smallest")),
            ("sincos2d", other),
            (("sincos2d", task, "smallest"), (other, task, "smallest")),
            margin=FIGURE_GAIN["R²" if task == "distance" else "points"],
        )
        for task in ("direction", "distance")
        for other in ("learned", "fourier")
    ),
    # Table 3: a relative encoding alone cannot tell upper from lower; absolute ones can
    _fails("thesis Table 3", "irpe_product", "absolute", "54.02 ± 7.12", "cannot tell upper from lower"),
    *(
        _learns("thesis Table 3", f, "absolute", p, "tells upper from lower")
        for f, p in (("learned", "99.85 ± 0.13"), ("sincos2d", "99.94 ± 0.10"), ("fourier", "99.99 ± 0.03"))
    ),
    # Table 4: fixed sinusoids fail under a colour shift; learnable tables do not
    _fails(
        "thesis Table 4", "sincos2d", "absolute_colorshift", "57.03 ± 14.90", "fails under unseen colours", bound=75.0
    ),
    *(
        _learns("thesis Table 4", f, "absolute_colorshift", p, "holds under unseen colours")
        for f, p in (("learned", "97.46 ± 3.26"), ("fourier", "98.49 ± 3.97"))
    ),
    # Fig. 5: learnable tables adapt to the upper/lower split
    *(
        Claim(
            "thesis Fig. 5",
            f"a {f} table learns the upper/lower split",
            "clear boundary (figure)",
            f"{f} half contrast after - before (cosine)",
            ">",
            0.0,
            half_contrast_gain(f),
            (f,),
            ((f, "absolute_colorshift", "full"),),
            margin=FIGURE_GAIN["cosine"],
        )
        for f in ("learned", "fourier")
    ),
    # §5.1: pretraining gives the Fourier table more relative bias
    Claim(
        "thesis §5.1",
        "pretraining raises the Fourier table's left/right probe",
        "92 -> 99",
        "fourier_pretrained - fourier left-right probe before, points",
        ">",
        0.0,
        difference(
            probe("fourier_pretrained", "direction", "before", "left_right"),
            probe("fourier", "direction", "before", "left_right"),
        ),
        ("fourier_pretrained", "fourier"),
        measured_on=(("fourier_pretrained", "direction", "full"), ("fourier", "direction", "full")),
        margin=(99 - 92) / 2,
    ),
    Claim(
        "thesis §5.1",
        "pretraining raises the Fourier table's offset probe",
        "0.91 -> 0.98",
        "fourier_pretrained - fourier offset probe R² before",
        ">",
        0.0,
        difference(
            probe("fourier_pretrained", "distance", "before", "distance_r2"),
            probe("fourier", "distance", "before", "distance_r2"),
        ),
        ("fourier_pretrained", "fourier"),
        measured_on=(("fourier_pretrained", "distance", "full"), ("fourier", "distance", "full")),
        margin=(0.98 - 0.91) / 2,
    ),
    # CPVT Table 2: PEG generalises to unseen resolutions better than a learned table
    Claim(
        "CPVT Table 2",
        "a PEG beats a learned table at a larger unseen resolution",
        "+2.0 (384 px, Ti)",
        "peg - learned direction acc at the largest size, points",
        ">",
        0.0,
        difference(largest_resolution("peg"), largest_resolution("learned")),
        ("peg", "learned"),
        (("peg", "direction", "full"), ("learned", "direction", "full")),
        margin=2.0 / 2,
    ),
    # iRPE: relative encodings can replace absolute ones for classification (non-inferiority, 1 point)
    Claim(
        "iRPE §4 / Tab. 4",
        "a relative encoding can replace an absolute one (left/right)",
        "≥ 0 (DeiT-S, ImageNet)",
        "irpe_product - learned direction acc, points",
        ">",
        -1.0,
        difference(metric("irpe_product", "direction"), metric("learned", "direction")),
        ("irpe_product", "learned"),
        (("irpe_product", "direction", "full"), ("learned", "direction", "full")),
    ),
)
"""Every claim the default study tests, in the order of the report."""


def evaluate_claims(
    results: Results,
    full: int,
    resolutions: tuple[int, ...],
    families: set[str],
    claims: tuple[Claim, ...] = CLAIMS,
    rule: Sequential | None = None,
) -> list[tuple[Claim, dict[int, float], Verdict]]:
    """Per claim: the per-seed values its verdict rests on, and the verdict (claims whose families were not
    run are skipped). Without ``rule``: one look, a bootstrap interval over every seed. With ``rule`` (the
    red-green study): the sequential rule's looks, over the seeds whose runs trained (a run that stopped short
    while the same family and task learned on another seed is a failure, left out and counted)."""
    out = []
    for claim in claims:
        if not set(claim.families) <= families:
            continue
        values = claim.measure(results, full, tuple(resolutions))
        if rule is None:
            verdict = judge([values[s] for s in sorted(values)], claim.side, claim.bound)
            out.append((claim, values, unconverged(verdict, len(flagged_seeds(claim, results, full) & set(values)))))
            continue
        verdict, kept = _sequential_verdict(claim, values, results, full, rule)
        capped = {s for s in capped_seeds(claim, results, full) if s in kept}
        out.append((claim, {s: values[s] for s in sorted(kept)}, unconverged(verdict, len(capped))))
    return out


def _sequential_verdict(
    claim: Claim, values: PerSeed, results: Results, full: int, rule: Sequential
) -> tuple[Verdict, set[int]]:
    """The rule's verdict on ``values`` and the seeds it rests on (those of its look, failures left out)."""
    failed = failed_seeds(claim, results, full)
    values = {s: v for s, v in values.items() if not math.isnan(v)}
    verdict = rule.judge(values, claim.side, claim.bound, failed, claim.margin)
    used = rule.rounds[verdict.round - 1]
    return verdict, {s for s in values if s < used and s not in failed}


def open_claims(
    results: Results, full: int, resolutions: tuple[int, ...], families: set[str], rule: Sequential
) -> list[tuple[Claim, int]]:
    """The claims the next round's seeds could decide, each with the round they need (1-based)."""
    out = []
    for claim in CLAIMS:
        if set(claim.families) <= families:
            values = claim.measure(results, full, tuple(resolutions))
            verdict, _ = _sequential_verdict(claim, values, results, full, rule)
            if rule.open(verdict):
                out.append((claim, verdict.round + 1))
    return out


def _runs_of(claim: Claim, results: Results, full: int) -> dict[tuple[str, str, str], Results]:
    """The stored runs behind each of ``claim``'s :attr:`~Claim.rests_on` entries, at its training-set size."""
    out = {}
    for family, task, size in claim.rests_on:
        runs = {c: r for c, r in results.items() if c.family == family and c.task == task and c.train_size != UNTRAINED}
        n = full if size == "full" else min((c.train_size for c in runs), default=full)
        out[(family, task, size)] = {c: r for c, r in runs.items() if c.train_size == n}
    return out


def flagged_seeds(claim: Claim, results: Results, full: int) -> set[int]:
    """Seeds of ``claim`` whose value rests on a flagged run (:mod:`.convergence`)."""
    return {c.seed for runs in _runs_of(claim, results, full).values() for c, r in runs.items() if is_flagged(r)}


def capped_seeds(claim: Claim, results: Results, full: int) -> set[int]:
    """Seeds of ``claim`` whose value rests on a run that ended at its cap still improving."""
    return {
        c.seed for runs in _runs_of(claim, results, full).values() for c, r in runs.items() if r.get("stop") == "cap"
    }


def failed_seeds(claim: Claim, results: Results, full: int) -> set[int]:
    """Seeds of ``claim`` resting on a run that stopped short (:func:`~.convergence.stopped_short`: at chance or
    on a plateau part-way, its training images not fitted) where the same family, task and size learned the
    task on another seed (:func:`~.convergence.has_learned`): a failure of that optimisation, not the model's
    result."""
    out: set[int] = set()
    for runs in _runs_of(claim, results, full).values():
        if any(has_learned(r) for r in runs.values()):
            out |= {c.seed for c, r in runs.items() if stopped_short(r)}
    return out


def fmt_value(value: float, claim: Claim) -> str:
    """A number in the claim's unit."""
    if math.isnan(value):
        return "—"
    return f"{value:.1f}" if claim.percent or "points" in claim.quantity else f"{value:.3f}"
