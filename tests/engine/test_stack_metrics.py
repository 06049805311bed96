"""The stacked running metrics are each member's own, to the last bit, in a stack that mixes classification
and regression members (random, non-zero outputs and targets)."""

import pytest
import torch

from vitpos.data.dataset import DataInfo
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.tasks.classification.metrics import RunningMetrics

SEVEN = (  # seven outputs: top-5 is no longer every sample
    DataInfo("c", "classification", classes=tuple("abcdefg"), mean=(0.5,) * 3, std=(0.25,) * 3),
    DataInfo("r", "regression", target_names=tuple("abcdefg"), mean=(0.5,) * 3, std=(0.25,) * 3),
)


@pytest.mark.parametrize("outputs", [2, 7])
def test_each_members_metrics_are_its_own_running_metrics(outputs):
    if outputs == 2:
        infos = [SyntheticTask(task, img_size=16).info for task in ("direction", "distance", "absolute", "distance")]
    else:
        infos = [SEVEN[0], SEVEN[1], SEVEN[0]]
    tasks = MemberTasks(infos, torch.device("cpu"))
    stacked = tasks.metrics(torch.device("cpu"))
    alone = [RunningMetrics(i.task, i.num_outputs) for i in infos]
    generator = torch.Generator().manual_seed(0)
    for batch in (8, 8, 5):
        logits = torch.randn(len(infos), batch, outputs, generator=generator)
        each = [
            torch.randint(0, outputs, (batch,), generator=generator)
            if i.task == "classification"
            else torch.randn(batch, outputs, generator=generator)
            for i in infos
        ]
        targets = tasks.targets(each)
        losses = tasks.losses(logits, targets)
        stacked.add(losses, logits, targets)
        for m, loss, out, target in zip(alone, losses, logits, each, strict=True):
            m.add_loss(loss, batch)
            m.add_predictions(out, target)
    computed = stacked.compute()
    assert computed == [m.compute() for m in alone]
    assert set(computed[0]) == {"loss", "acc1"} | ({"acc5"} if outputs > 5 else set())
    assert set(computed[1]) == {"loss", "r2"}
    assert 0 < computed[0]["acc1"] < 100 and computed[1]["r2"] < 1
    assert outputs == 2 or 0 < computed[0]["acc5"] < 100


def test_members_targets_of_other_kinds_and_lengths_are_joined_in_member_order():
    """Labels and regression targets (width 7) of 3, 2 and 4 samples: one (9, 7) tensor, each member's rows its
    own targets as floats, padded with zeros."""
    tasks = MemberTasks([SEVEN[0], SEVEN[1], SEVEN[0]], torch.device("cpu"))
    each = [torch.tensor([6, 0, 3]), torch.randn(2, 7), torch.tensor([1, 2, 5, 4])]
    joined = tasks.joined(each)
    assert joined.shape == (9, 7) and joined.dtype == torch.float32
    torch.testing.assert_close(joined[3:5], each[1], rtol=0, atol=0)
    for rows, labels in ((joined[:3], each[0]), (joined[5:], each[2])):
        assert torch.equal(rows[:, 0], labels.float()) and not rows[:, 1:].any()
    assert torch.equal(tasks.joined(each[:1]), each[0].float()[:, None].expand(3, 7) * (torch.arange(7) == 0))
