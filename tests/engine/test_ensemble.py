"""A stacked ensemble member ends exactly where the single-model trainer takes the same model."""

import dataclasses

import numpy as np
import pytest
import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.ensemble import EnsembleError, Member, Stopping, stack_error, train_ensemble
from vitpos.engine.evaluate import evaluate
from vitpos.engine.train import train
from vitpos.models.factory import create_model, get_config

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL = get_config("thesis_vit", img_size=16, embed_dim=16, num_heads=2, mlp_ratio=2.0)


def _member(task: str, seed: int, n: int = 48, **train) -> Member:
    data = SyntheticTask(task, img_size=16, square_size=4, train=n, val=16, test=24, seed=seed).splits()
    settings = dict(epochs=3, batch_size=16, lr=3e-3, warmup_epochs=1, weight_decay=0.1, device="cpu", progress=False)
    return Member(TrainConfig(data=data.info.spec, seed=seed, **{**settings, **train}), data)


@pytest.mark.parametrize("absolute,clip", [("learned:std=1", 0.05), ("fourier:gamma=2", 0.0)])
def test_a_member_equals_the_model_trained_alone(float64, absolute, clip):
    """Seeds and tasks (classification and regression) mixed, clipping active on one case: every
    member's parameters, training loss and val/test metrics match a lone run after 9 steps."""
    model_cfg = MODEL.replace(absolute=absolute, num_classes=2)
    members = [
        _member("direction", 0, grad_clip=clip),
        _member("distance", 1, grad_clip=clip),
        _member("absolute", 7, grad_clip=clip),
    ]
    together = train_ensemble(model_cfg, members)
    for member, result in zip(members, together, strict=True):
        alone = train(model_cfg, member.cfg, member.data)
        assert next(result.model.parameters()).dtype == torch.float64
        for (name, p), q in zip(result.model.named_parameters(), alone.model.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-11, msg=name)
        assert set(result.test) == set(alone.test)
        for key, value in alone.test.items():
            assert result.test[key] == pytest.approx(value, rel=1e-9, abs=1e-11), key
        for row, ref in zip(result.history, alone.history, strict=True):
            for key in ("train_loss", "val_loss", "lr", "step"):
                if key in ref:
                    assert row[key] == pytest.approx(ref[key], rel=1e-9), key
    before = create_model(model_cfg)
    assert any(
        (p - q).abs().max() > 1e-3 for p, q in zip(together[0].model.parameters(), before.parameters(), strict=True)
    )


@pytest.mark.parametrize("task", ["direction", "distance"])
def test_an_ensemble_of_one_equals_the_model_trained_alone(float64, task):
    """One member runs without vmap and ends where the single-model trainer does."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    member = _member(task, 3, grad_clip=0.05)
    (result,) = train_ensemble(model_cfg, [member])
    alone = train(model_cfg, member.cfg, member.data)
    for (name, p), q in zip(result.model.named_parameters(), alone.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-11, msg=name)
    assert result.test == pytest.approx(alone.test, rel=1e-9)


def test_a_member_that_brings_its_model_trains_a_copy_of_it(float64):
    """A member given the model its seed builds ends where one built by the ensemble does; the given model
    is left as it was (a study reads its table as the "before" of its probes)."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    member = _member("direction", 4)
    torch.manual_seed(4)
    initial = create_model(model_cfg)
    kept = {k: v.clone() for k, v in initial.state_dict().items()}
    (built,) = train_ensemble(model_cfg, [member])
    (brought,) = train_ensemble(model_cfg, [dataclasses.replace(member, initial=initial)])
    assert all(torch.equal(p, q) for p, q in zip(built.model.parameters(), brought.model.parameters(), strict=True))
    assert all(torch.equal(v, kept[k]) for k, v in initial.state_dict().items())
    assert brought.model is not initial


def test_stopping_keeps_each_members_best_epoch_and_says_why(float64):
    """Patience 1 over a 6-epoch cap: each member's history ends where it stopped, its last row says why
    (solved, patience or cap), and its returned model scores its best epoch's validation metric (float64:
    the stacked forward and a lone one agree to float32's rounding only)."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [_member("direction", 0, epochs=6, lr=3e-2), _member("distance", 1, epochs=6, lr=3e-2)]
    results = train_ensemble(model_cfg, members, Stopping(patience=1))
    for member, result in zip(members, results, strict=True):
        key = "val_acc1" if member.data.info.task == "classification" else "val_r2"
        last = result.history[-1]
        assert last["stop"] in ("solved", "patience", "cap") and all("stop" not in r for r in result.history[:-1])
        assert last["epoch"] == 6 if last["stop"] == "cap" else last["epoch"] <= 6
        best = max(result.history, key=lambda r: r[key])
        assert last["best_epoch"] == next(r["epoch"] for r in result.history if r[key] == best[key])
        if last["stop"] == "patience":
            assert last["epoch"] == last["best_epoch"] + 1
        now = evaluate(result.model, member.data.val, batch_size=16)
        assert now[key[4:]] == pytest.approx(best[key], rel=1e-9, abs=1e-9)
    frozen = _member("direction", 2, epochs=6, lr=0.0, min_lr=0.0)  # lr 0: nothing changes, so no epoch beats the first
    (stuck,) = train_ensemble(model_cfg, [frozen], Stopping(patience=2))
    assert [r["epoch"] for r in stuck.history] == [1, 2, 3] and stuck.history[-1]["stop"] == "patience"
    (late,) = train_ensemble(model_cfg, [frozen], Stopping(patience=2, min_epochs=5))  # no stop before epoch 5
    assert len(late.history) == 5 and late.history[-1]["stop"] == "patience"


def test_members_that_cannot_share_one_optimiser_are_refused():
    with pytest.raises(EnsembleError, match="members differ in weight_decay"):
        train_ensemble(MODEL, [_member("direction", 0), _member("direction", 1, weight_decay=0.2)])
    with pytest.raises(EnsembleError, match="ema_decay need the single-model trainer"):
        train_ensemble(MODEL, [_member("direction", 0, ema_decay=0.9), _member("direction", 1, ema_decay=0.9)])
    with pytest.raises(EnsembleError, match="init need the single-model trainer"):  # it would start from scratch
        train_ensemble(MODEL, [_member("direction", 0, init="weights.pt")])


def test_stack_error_tells_which_models_vmap():
    assert (
        stack_error(create_model(MODEL.replace(absolute="fourier:gamma=2", conditional="peg@-1", join="lape")).train())
        is None
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_members_on_courses_of_their_own_train_under_cpu_autocast(dtype):
    """Training sets of 48 and 96 images (3 and 6 steps an epoch) in one stack under CPU autocast: every
    member's weights stay finite, and each history has a row with training metrics at each of its own epoch
    ends."""
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [
        _member("direction", 0, n=48, cpu_amp=True, amp_dtype=dtype),
        _member("distance", 1, n=96, cpu_amp=True, amp_dtype=dtype, epochs=2),
    ]
    results = train_ensemble(model_cfg, members, Stopping(patience=5))
    assert all(torch.isfinite(p).all() for r in results for p in r.model.parameters())
    assert [[row["step"] for row in r.history] for r in results] == [[3, 6, 9], [6, 12]]
    assert all(np.isfinite(row["train_loss"]) and "val_loss" in row for r in results for row in r.history)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_member_equals_the_model_trained_alone():
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    members = [_member(task, seed, device="cuda", amp=False) for task, seed in (("direction", 0), ("distance", 1))]
    for member, result in zip(members, train_ensemble(model_cfg, members), strict=True):
        alone = train(model_cfg, member.cfg, member.data)
        for p, q in zip(result.model.parameters(), alone.model.parameters(), strict=True):  # TF32 convolutions: loose
            torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-3)
    amp = train_ensemble(model_cfg, [_member("direction", s, device="cuda") for s in (0, 1)])  # bf16 autocast
    assert all(torch.isfinite(p).all() for r in amp for p in r.model.parameters())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_every_study_family_stacks():
    """No default study family falls back to one model at a time on CUDA, in float32 and under bf16 autocast."""
    from vitpos.study.families import DEFAULT_FAMILIES
    from vitpos.study.hosts import study_model

    for family in DEFAULT_FAMILIES:
        model = create_model(family.model_config(study_model(), num_classes=2)).cuda().train()
        assert stack_error(model) is None, family.label
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert stack_error(model) is None, family.label


def test_an_augmentation_that_draws_runs_member_by_member_from_each_members_seed():
    """Flips and random erasing (on an image set that allows them) draw per member from its own seeded
    stream: two members of one seed and data end alike, and unlike the same member trained unaugmented."""
    from vitpos.data.dataset import DataInfo, DataSplits, TensorImages

    info = DataInfo("t", "classification", classes=("a", "b"), mean=(0.5,) * 3, std=(0.25,) * 3)
    generator = torch.Generator().manual_seed(0)

    def split(n: int) -> TensorImages:
        images = torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8, generator=generator)
        return TensorImages(images, torch.randint(0, 2, (n,), generator=generator), info)

    data = DataSplits(split(32), split(16), split(16))
    settings = dict(data="t", seed=3, epochs=1, batch_size=16, lr=1e-2, warmup_epochs=0, device="cpu", progress=False)
    drawn = Member(TrainConfig(**settings, hflip=0.5, random_erasing=0.5), data)
    plain = Member(TrainConfig(**settings), data)
    model_cfg = MODEL.replace(absolute="learned:std=1", num_classes=2)
    first, second = (r.model.state_dict() for r in train_ensemble(model_cfg, [drawn, drawn]))
    (unaugmented,) = (r.model.state_dict() for r in train_ensemble(model_cfg, [plain]))
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], unaugmented[k]) for k in first)
