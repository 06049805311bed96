"""Members of one stack at their own learning rates and with their own stops end where each ends alone."""

import dataclasses

import pytest
import torch

from vitpos.engine.ensemble import EnsembleError, Stopping, train_ensemble
from vitpos.engine.train import train

from .test_ensemble import MODEL, _member

pytestmark = pytest.mark.usefixtures("one_thread")


def _assert_same_run(result, alone, tol: float) -> None:
    for (name, p), q in zip(result.model.named_parameters(), alone.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=tol, msg=name)
    assert result.test == pytest.approx(alone.test, rel=tol, abs=tol)
    assert len(result.history) == len(alone.history)
    for row, ref in zip(result.history, alone.history, strict=True):
        for key, value in ref.items():
            if isinstance(value, str):
                assert row[key] == value, key
            elif key not in ("time_s", "images_per_s"):
                assert row[key] == pytest.approx(value, rel=tol, abs=tol), key


def test_members_at_different_learning_rates_equal_their_runs_alone(float64):
    """The learning-rate trials of a study stack: three rates, two tasks, each member as trained alone."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [
        _member("direction", 0, lr=1e-3, grad_clip=0.05),
        _member("distance", 0, lr=3e-3, grad_clip=0.05),
        _member("direction", 0, lr=1e-2, grad_clip=0.05),
    ]
    together = train_ensemble(model_cfg, members)
    for member, result in zip(members, together, strict=True):
        _assert_same_run(result, train(model_cfg, member.cfg, member.data), 1e-12)
    assert together[0].history[0]["lr"] != together[2].history[0]["lr"]


def test_masked_stopping_leaves_each_member_as_trained_alone(float64):
    """Members that stop at different epochs (a rate of 0 stops by patience at once, the others later or at
    the cap): each member's weights, history and test metrics equal an ensemble of it alone, to 1e-12."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [
        _member("direction", 0, epochs=6, lr=3e-3, min_lr=0.0),
        _member("distance", 1, epochs=6, lr=0.0, min_lr=0.0),
        _member("absolute", 2, epochs=6, lr=1e-3, min_lr=0.0),
    ]
    rule = Stopping(patience=1)
    together = train_ensemble(model_cfg, members, rule)
    ends = [len(r.history) for r in together]
    assert ends[1] == 2 and together[1].history[-1]["stop"] == "patience"
    assert ends[0] > max(ends[1:]), ends  # the first trains on with the others masked
    for member, result in zip(members, together, strict=True):
        (alone,) = train_ensemble(model_cfg, [member], rule)
        _assert_same_run(result, alone, 1e-12)


def test_members_on_courses_of_their_own_equal_their_runs_alone(float64):
    """Training sets of 48 and 96 images (3 and 6 steps an epoch), caps of 12 and 6 steps, evaluation every
    other epoch, a cool-down, a batch-scaled rate: each member evaluated at the end of its own epochs, the
    shorter one frozen at its cap while the others go on, and each as the single-model trainer runs it."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [
        _member("direction", 0, n=48, epochs=4, eval_every=2, cooldown_epochs=1),
        _member("distance", 1, n=96, epochs=2, warmup_epochs=0.5, lr_batch=8),
        _member("absolute", 2, n=48, epochs=2),
    ]
    together = train_ensemble(model_cfg, members)
    assert [[r["step"] for r in result.history] for result in together] == [[3, 6, 9, 12], [6, 12], [3, 6]]
    assert ["val_loss" in r for r in together[0].history] == [False, True, False, True]
    for member, result in zip(members, together, strict=True):
        _assert_same_run(result, train(model_cfg, member.cfg, member.data), 1e-12)


def test_members_with_stopping_rules_of_their_own_stop_as_alone(float64):
    """One rule per member (patience in the member's own epochs, as a study scales it by training-set size)."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [
        _member("direction", 0, n=48, epochs=6, lr=0.0, min_lr=0.0),  # never improves: stops by patience
        _member("distance", 1, n=96, epochs=3, lr=3e-3, min_lr=0.0),
    ]
    rules = [Stopping(patience=1), Stopping(patience=2, min_epochs=3)]
    together = train_ensemble(model_cfg, members, rules)
    assert together[0].history[-1]["stop"] == "patience" and len(together[0].history) == 2
    for member, rule, result in zip(members, rules, together, strict=True):
        (alone,) = train_ensemble(model_cfg, [member], rule)
        _assert_same_run(result, alone, 1e-12)
    with pytest.raises(EnsembleError, match="1 stopping rules for 2 members"):
        train_ensemble(model_cfg, members, rules[:1])


def test_a_fallback_trains_alongside_its_member_and_stops_when_that_member_stops_before_its_cap(float64):
    """Each member's run on a longer cap stands in for it (``fallback_for``): the fallback of a member stopped by
    patience stops at that member's step (``unneeded``), the fallback of a member at its cap trains on to its
    own end, equal to its run alone to 1e-12."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    short = [_member("direction", 0, epochs=3, lr=0.0, min_lr=0.0), _member("distance", 1, epochs=2, min_lr=0.0)]
    longer = [
        dataclasses.replace(m, cfg=dataclasses.replace(m.cfg, epochs=2 * m.cfg.epochs), fallback_for=j)
        for j, m in enumerate(short)
    ]
    rules = [Stopping(patience=1)] + [Stopping(patience=9)] * 3  # the fallbacks would go on
    together = train_ensemble(model_cfg, short + longer, rules)
    assert [r.history[-1]["stop"] for r in together] == ["patience", "cap", "unneeded", "cap"]
    assert together[2].history[-1]["step"] == together[0].history[-1]["step"] == 6  # stopped with its member
    assert together[3].history[-1]["step"] == 12  # its member ended at its cap (step 6): it went on
    (alone,) = train_ensemble(model_cfg, [dataclasses.replace(longer[1], fallback_for=None)], rules[3])
    _assert_same_run(together[3], alone, 1e-12)
    for wrong in (4, 1):
        with pytest.raises(EnsembleError, match=f"member 1: fallback_for = {wrong} is not another member's index"):
            train_ensemble(model_cfg, [short[0], dataclasses.replace(short[1], fallback_for=wrong)])
