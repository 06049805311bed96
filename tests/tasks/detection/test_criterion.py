"""DETR's set loss: zero box terms on perfect boxes, the no-object weight, auxiliary layers."""

import pytest
import torch
import torch.nn.functional as F

from vitpos.tasks.detection import LossWeights, ObjectTargets, SetCriterion, pad_objects


def outputs(logits, boxes, aux=0):
    out = {"pred_logits": logits, "pred_boxes": boxes}
    if aux:
        out["aux_outputs"] = [{"pred_logits": logits.clone(), "pred_boxes": boxes.clone()} for _ in range(aux)]
    return out


def test_perfect_boxes_have_zero_box_losses_and_ce_is_weighted_by_hand():
    boxes = torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.7, 0.6, 0.2, 0.4]])
    targets = pad_objects([ObjectTargets(torch.tensor([1, 0]), boxes)], slots=3)
    pred = torch.rand(1, 4, 4) * 0.1 + 0.45
    pred[0, 2], pred[0, 0] = boxes
    logits = torch.randn(1, 4, 3)
    criterion = SetCriterion(num_classes=2, weights=LossWeights(eos_coef=0.25))
    parts = criterion.components(outputs(logits, pred), targets)
    assert parts["bbox"].item() == pytest.approx(0.0, abs=1e-6)
    assert parts["giou"].item() == pytest.approx(0.0, abs=1e-6)
    classes = torch.tensor(
        [0, 2, 1, 2]
    )  # query 2 -> object 0 (class 1), query 0 -> object 1 (class 0); others no-object
    nll = -logits[0].log_softmax(-1)[torch.arange(4), classes]
    weight = torch.tensor([1.0, 0.25, 1.0, 0.25])
    assert parts["ce"].item() == pytest.approx(((nll * weight).sum() / weight.sum()).item(), rel=1e-5)


def test_box_losses_are_normalised_by_the_number_of_objects():
    boxes = torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.7, 0.6, 0.2, 0.4]])
    shifted = boxes + torch.tensor([0.05, 0.0, 0.0, 0.0])
    targets = pad_objects([ObjectTargets(torch.tensor([0, 0]), boxes)])
    parts = SetCriterion(1).components(outputs(torch.zeros(1, 2, 2), shifted[None]), targets)
    assert parts["bbox"].item() == pytest.approx(0.05, rel=1e-4)  # (0.05 + 0.05) / 2 objects


def test_auxiliary_layers_add_their_own_terms_and_the_sum_uses_detrs_weights():
    torch.manual_seed(0)
    targets = pad_objects([ObjectTargets(torch.tensor([0]), torch.tensor([[0.5, 0.5, 0.3, 0.3]]))] * 2)
    out = outputs(torch.randn(2, 5, 3), torch.rand(2, 5, 4) * 0.3 + 0.3, aux=2)
    criterion = SetCriterion(2)
    parts = criterion.components(out, targets)
    assert sorted(parts) == sorted(
        ["ce", "bbox", "giou"] + [f"aux{i}_{k}" for i in range(2) for k in ("ce", "bbox", "giou")]
    )
    last = parts["ce"] + 5 * parts["bbox"] + 2 * parts["giou"]
    assert criterion(out, targets).item() == pytest.approx(3 * last.item(), rel=1e-5)  # the aux layers are copies


def test_images_without_objects_learn_no_object_only():
    targets = pad_objects([ObjectTargets(torch.empty(0, dtype=torch.int64), torch.empty(0, 4))], slots=2)
    logits = torch.randn(1, 3, 4)
    parts = SetCriterion(3).components(outputs(logits, torch.rand(1, 3, 4)), targets)
    assert parts["bbox"].item() == parts["giou"].item() == 0.0
    assert parts["ce"].item() == pytest.approx(F.cross_entropy(logits[0], torch.full((3,), 3)).item(), rel=1e-5)
