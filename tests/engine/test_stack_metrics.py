"""The stacked running metrics are each member's own, to the last bit, in a stack that mixes classification
and regression members (random, non-zero outputs and targets)."""

import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.tasks.classification.metrics import RunningMetrics


def test_each_members_metrics_are_its_own_running_metrics():
    infos = [SyntheticTask(task, img_size=16).info for task in ("direction", "distance", "absolute", "distance")]
    tasks = MemberTasks(infos, torch.device("cpu"))
    stacked = tasks.metrics(torch.device("cpu"))
    alone = [RunningMetrics(i.task, i.num_outputs) for i in infos]
    generator = torch.Generator().manual_seed(0)
    for batch in (8, 8, 5):
        outputs = torch.randn(len(infos), batch, 2, generator=generator)
        each = [
            torch.randint(0, 2, (batch,), generator=generator)
            if i.task == "classification"
            else torch.randn(batch, 2, generator=generator)
            for i in infos
        ]
        targets = tasks.targets(each)
        losses = tasks.losses(outputs, targets)
        stacked.add(losses, outputs, targets)
        for m, loss, out, target in zip(alone, losses, outputs, each, strict=True):
            m.add_loss(loss, batch)
            m.add_predictions(out, target)
    computed = stacked.compute()
    assert computed == [m.compute() for m in alone]
    assert set(computed[0]) == {"loss", "acc1"} and set(computed[1]) == {"loss", "r2"}
    assert 0 < computed[0]["acc1"] < 100 and computed[1]["r2"] < 1
