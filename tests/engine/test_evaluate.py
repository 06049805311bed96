"""Evaluation at several resolutions, checked with oracle models that read the squares' places."""

import pytest
import torch
from torch import nn

import vitpos
from vitpos.data import SyntheticTask
from vitpos.engine import evaluate, evaluate_resolutions, resolution_table


class SquareOracle(nn.Module):
    """Finds the red and green squares in any image and answers from their centres."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols, rows = torch.arange(x.shape[-1]).float(), torch.arange(x.shape[-2]).float()
        centres = []
        for mask in ((x[:, 0] > 0.5) & (x[:, 1] < 0.5), (x[:, 1] > 0.5) & (x[:, 0] < 0.5)):  # red, green
            m = mask.float()
            n = m.sum(dim=(1, 2))
            centres.append(((m.sum(1) * cols).sum(-1) / n, (m.sum(2) * rows).sum(-1) / n, n.sqrt()))
        (rx, ry, side), (gx, gy, _) = centres
        if self.task == "distance":
            return torch.stack([(rx - gx) / side, (ry - gy) / side], dim=-1)
        right = (gx > rx).float()
        return torch.stack([1 - right, right], dim=-1)


@pytest.mark.parametrize("task,metric,perfect", [("direction", "acc1", 100.0), ("distance", "r2", 1.0)])
def test_every_resolution_keeps_the_label_semantics(task, metric, perfect):
    split = SyntheticTask(task, square_size=4, test=200).render("test")
    results = evaluate_resolutions(SquareOracle(task), split, [32, 48, (32, 64)], device="cpu")
    assert list(results) == [(32, 32), (48, 48), (32, 64)]
    for metrics in results.values():
        assert metrics[metric] == pytest.approx(perfect)


def test_matches_a_direct_loop():
    split = SyntheticTask("direction4", square_size=8, test=70).render("test")
    model = vitpos.create_model("thesis_vit", patch_size=8, num_classes=4).eval()
    with torch.no_grad():
        logits = model(split.images.float() / 255)
    expected = 100 * (logits.argmax(-1) == split.targets).float().mean().item()
    out = evaluate(model, split, batch_size=16)
    assert out["acc1"] == pytest.approx(expected)
    assert out["loss"] == pytest.approx(torch.nn.functional.cross_entropy(logits, split.targets).item(), rel=1e-5)
    assert model.training is False


def test_sizes_must_fit_the_patch():
    model = vitpos.create_model("thesis_vit")
    with pytest.raises(ValueError, match="resolution 30x30 is not a multiple of the patch size 4"):
        evaluate_resolutions(model, SyntheticTask(test=4).render("test"), [32, 30])


def test_table_like_cpvt_table_2():
    rows = [
        ("learned", 5_717_416, {(32, 32): {"acc1": 72.2}, (48, 48): {"acc1": 71.2}}),
        ("peg", 5_681_000, {(32, 32): {"acc1": 73.4}, (48, 48): {"acc1": 74.2}}),
    ]
    table = resolution_table(rows, "classification").splitlines()
    assert table[0] == "| Model | Params | 32(%) | 48(%) |"
    assert table[2] == "| learned | 5.7M | 72.2 | 71.2 |"
    assert table[3] == "| peg | 5.7M | 73.4(+1.2) | 74.2(+3.0) |"
    r2 = resolution_table([("run", 53_378, {(16, 32): {"r2": 0.5}})], "regression").splitlines()
    assert r2[0] == "| Model | Params | 16x32(R²) |" and r2[2] == "| run | 53.4K | 0.500 |"
