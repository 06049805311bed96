"""A run stuck at chance is flagged, and a claim resting on it reads *not converged*, never contradicted."""

import pytest
import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.ensemble import Member, Stopping, train_ensemble
from vitpos.models.factory import get_config
from vitpos.study.cells import Cell
from vitpos.study.claims import CLAIMS, evaluate_claims
from vitpos.study.convergence import at_chance, run_record
from vitpos.study.sections import verdict_table
from vitpos.study.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_CONVERGED, REPRODUCED, judge, unconverged

pytestmark = pytest.mark.usefixtures("one_thread")


def _stuck_run() -> dict:
    """A real training that cannot leave chance (learning rate 0), stopped by the patience rule."""
    data = SyntheticTask("direction", img_size=16, square_size=4, train=64, val=200, test=32, seed=0).splits()
    cfg = TrainConfig(data=data.info.spec, epochs=8, batch_size=32, lr=0.0, min_lr=0.0, device="cpu", progress=False)
    model = get_config("thesis_vit", img_size=16, embed_dim=16, num_heads=2, mlp_ratio=2.0, num_classes=2)
    (result,) = train_ensemble(model, [Member(cfg, data)], Stopping(patience=2))
    return run_record(result.history, "acc1", 2)


def test_a_run_stuck_at_chance_is_flagged_and_its_claim_reads_not_converged():
    record = _stuck_run()
    assert record["stop"] == "patience" and record["converged"] and record["steps"] == 3 * 2
    assert record["at_chance"] and record["flagged"]
    assert len(record["curve"]) == 3 and all(len(row) == 4 for row in record["curve"])
    results = {Cell("learned", "direction", 64, s): {"test": 0.5, "metric": "accuracy", **record} for s in range(4)}
    claim = next(c for c in CLAIMS if c.quantity == "learned direction acc %")
    assert judge([50.0] * 4, claim.side, claim.bound).outcome == CONTRADICTED  # what the old report printed
    ((_, values, verdict),) = evaluate_claims(results, 64, (), {"learned"}, (claim,))
    assert verdict.outcome == NOT_CONVERGED and verdict.flagged == 4 and values == {s: 50.0 for s in range(4)}
    assert "**not converged** (4 of 4 seeds rest on flagged runs)" in verdict_table([(claim, values, verdict)])


def test_only_the_flagged_seeds_of_the_claims_own_runs_count():
    clean = {"flagged": False}
    results = {Cell("learned", "direction", 64, s): {"test": 0.5, **clean} for s in range(3)}
    results[Cell("learned", "direction", 64, 3)] = {"test": 0.5, "flagged": True}
    results[Cell("learned", "distance", 64, 0)] = {"test": 0.1, "flagged": True}  # another task: irrelevant
    claim = next(c for c in CLAIMS if c.quantity == "learned direction acc %")
    ((_, _, verdict),) = evaluate_claims(results, 64, (), {"learned"}, (claim,))
    assert verdict.outcome == NOT_CONVERGED and verdict.flagged == 1
    before = next(c for c in CLAIMS if c.quantity == "learned left-right probe before, %")
    assert before.rests_on == ()  # a probe at initialisation rests on no training


def test_unconverged_keeps_reproduced_and_leaves_clean_verdicts_alone():
    reproduced = judge([50.0, 51.0, 49.0], "<", 60.0)
    assert unconverged(reproduced, 3).outcome == REPRODUCED and unconverged(reproduced, 3).flagged == 3
    inconclusive = judge([40.0, 95.0, 70.0], ">", 60.0)
    assert inconclusive.outcome == INCONCLUSIVE and unconverged(inconclusive, 0) == inconclusive
    assert unconverged(inconclusive, 1).outcome == NOT_CONVERGED


@pytest.mark.parametrize(
    "metric,value,classes,chance",
    [
        ("acc1", 59.9, 2, True),
        ("acc1", 60.0, 2, False),
        ("acc1", 34.0, 4, True),
        ("r2", 0.05, 2, True),
        ("r2", 0.5, 2, False),
    ],
)
def test_chance_levels(metric, value, classes, chance):
    assert at_chance(metric, value, classes) is chance


def test_a_run_at_the_cap_is_flagged_even_when_it_learned():
    history = [
        {"epoch": e, "step": 10 * e, "train_loss": 1.0 / e, "train_acc1": 60.0 + 5 * e, "val_acc1": 60.0 + 5 * e}
        for e in (1, 2, 3)
    ]
    history[-1] |= {"stop": "cap", "best_epoch": 3}
    record = run_record(history, "acc1", 2)
    assert record["flagged"] and not record["converged"] and not record["at_chance"]
    assert record["train_metric"] == 75.0 and record["curve"][0] == [10, 1.0, 65.0, 65.0]
    solved_late = run_record([{**history[0], "train_acc1": 52.0, "val_acc1": 100.0, "stop": "solved"}], "acc1", 2)
    assert not solved_late["flagged"]  # a low running training accuracy, but it left chance: not flagged
    assert torch.tensor(record["curve"]).shape == (3, 4)
