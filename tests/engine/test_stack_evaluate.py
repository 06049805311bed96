"""One stacked evaluation pass gives each member the metrics of its model evaluated alone."""

import pytest
import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.evaluate import evaluate
from vitpos.engine.precision import Precision
from vitpos.engine.stack_evaluate import StackEvaluation, evaluate_models, evaluate_stack, stackable
from vitpos.engine.stacked_step import Stack
from vitpos.models.factory import create_model

from .test_ensemble import MODEL

pytestmark = pytest.mark.usefixtures("one_thread")


def _split(task: str, seed: int, n: int = 20):
    return SyntheticTask(task, img_size=16, square_size=4, train=8, val=n, test=8, seed=seed).splits().val


def test_each_member_gets_the_metrics_of_its_model_alone(float64):
    """Classification and regression members, a last batch shorter than the others."""
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(create_model(MODEL.replace(absolute="learned:std=1", num_classes=2)).train())
    splits = [_split("direction", 0), _split("distance", 1), _split("absolute", 2)]
    stack = Stack(models)
    results = evaluate_stack(stack, splits, batch_size=8, device=torch.device("cpu"), precision=Precision("cpu"))
    assert stack.base.training  # its mode restored
    for model, split, result in zip(models, splits, results, strict=True):
        alone = evaluate(model, split, batch_size=8)
        assert set(result) == set(alone)
        assert result == pytest.approx(alone, rel=1e-12, abs=1e-12)


def test_some_members_alone_get_the_metrics_of_their_models(float64):
    """Members 2 and 0 (in that order), the others not run: each the metrics of its model evaluated alone."""
    models = []
    for seed in range(4):
        torch.manual_seed(seed)
        models.append(create_model(MODEL.replace(absolute="learned:std=1", num_classes=2)).train())
    splits = [_split("direction", 0), _split("distance", 1), _split("absolute", 2), _split("distance", 3)]
    evaluation = StackEvaluation(splits, torch.device("cpu"))
    results = evaluation(Stack(models), batch_size=8, precision=Precision("cpu"), members=[2, 0])
    for i, result in zip([2, 0], results, strict=True):
        assert result == pytest.approx(evaluate(models[i], splits[i], batch_size=8), rel=1e-12, abs=1e-12)


def test_splits_that_cannot_stack_are_named():
    assert stackable([_split("direction", 0), _split("distance", 1)])
    assert not stackable([_split("direction", 0), _split("direction", 1, n=12)])
    model = create_model(MODEL.replace(num_classes=2))
    with pytest.raises(ValueError, match="differ in task kind, length or image size"):
        evaluate_stack(
            Stack([model, model]),
            [_split("direction", 0), _split("direction", 1, n=12)],
            batch_size=8,
            device=torch.device("cpu"),
            precision=Precision("cpu"),
        )


def test_models_evaluated_together_get_their_own_metrics_stacked_or_one_by_one(float64, monkeypatch):
    """Three models of one config at a size they were not trained at (the study's resolution sweep): one stacked
    pass, each model's metrics as alone; models of two configs, or splits that do not stack, one by one."""
    from vitpos.engine import stack_evaluate

    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(create_model(MODEL.replace(absolute="learned:std=1", num_classes=2)).eval())
    splits = [_split("direction", seed).at_size(24) for seed in range(3)]
    stacked = []
    monkeypatch.setattr(stack_evaluate, "evaluate_stack", lambda *a, **k: stacked.append(a) or evaluate_stack(*a, **k))
    results = evaluate_models(models, splits, batch_size=8, device=torch.device("cpu"))
    assert len(stacked) == 1
    for model, split, result in zip(models, splits, results, strict=True):
        assert result == pytest.approx(evaluate(model, split, batch_size=8), rel=1e-12, abs=1e-12)
    other = create_model(MODEL.replace(absolute="sincos2d", num_classes=2)).eval()
    mixed = evaluate_models([models[0], other], splits[:2], batch_size=8, device=torch.device("cpu"))
    uneven = evaluate_models(models[:2], [splits[0], _split("direction", 1, n=12)], batch_size=8,
                             device=torch.device("cpu"))  # fmt: skip
    assert len(stacked) == 1  # neither stacked
    assert mixed[1] == evaluate(other, splits[1], batch_size=8) and uneven[0] == evaluate(
        models[0], splits[0], batch_size=8
    )


@pytest.mark.parametrize("host", ["pvt", "swin"])
def test_pyramid_models_evaluated_together_at_another_size_get_their_own_metrics(host):
    """The study's resolution sweep on the PVT and Swin hosts: two models stacked at a size they were not built
    at, each with the metrics of its model alone (float32: the stacked products round apart in the last bits)."""
    from vitpos.study.families import parse_family
    from vitpos.study.protocol import StudyConfig

    family = parse_family(f"t: host={host} absolute=learned embed_dims=8,32 num_heads=1,2 mlp_ratios=2,2")
    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        models.append(create_model(family.model_config(StudyConfig().model, num_classes=2)).eval())
    splits = [_split("direction", seed).at_size(32) for seed in range(2)]
    results = evaluate_models(models, splits, batch_size=8, device=torch.device("cpu"))
    for model, split, result in zip(models, splits, results, strict=True):
        alone = evaluate(model, split, batch_size=8)
        assert result["acc1"] == alone["acc1"] and result["loss"] == pytest.approx(alone["loss"], rel=1e-5)
