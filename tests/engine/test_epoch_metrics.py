"""Each member's training metrics over its own epoch, from the kept steps, equal its RunningMetrics over that
epoch's batches, for members whose epochs end at different steps."""

import pytest
import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.epoch_metrics import EpochMetrics
from vitpos.engine.member_course import Course, by_epoch_length
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.tasks.classification.metrics import RunningMetrics

from .test_stack_metrics import SEVEN


@pytest.mark.parametrize("outputs", [2, 7])
def test_members_with_epochs_of_their_own_get_their_epochs_metrics(outputs):
    """Epochs of 2, 3 and 2 steps over 7 steps (a ring of 3): at every member's epoch end its metrics are
    those of RunningMetrics over that epoch's batches alone."""
    if outputs == 2:
        infos = [SyntheticTask(task, img_size=16).info for task in ("direction", "distance", "absolute")]
    else:
        infos = [SEVEN[0], SEVEN[1], SEVEN[0]]
    per_epoch = [2, 3, 2]
    courses = [Course(TrainConfig(epochs=6), p) for p in per_epoch]
    tasks = MemberTasks(infos, torch.device("cpu"))
    kept = EpochMetrics(tasks, max(per_epoch))
    alone = [RunningMetrics(i.task, i.num_outputs) for i in infos]
    generator = torch.Generator().manual_seed(0)
    checked = 0
    for step in range(7):
        logits = torch.randn(len(infos), 6, outputs, generator=generator)
        each = [
            torch.randint(0, outputs, (6,), generator=generator)
            if i.task == "classification"
            else torch.randn(6, outputs, generator=generator)
            for i in infos
        ]
        targets = tasks.targets(each)
        losses = tasks.losses(logits, targets)
        kept.add(step, losses, logits, targets)
        for m, loss, out, target in zip(alone, losses, logits, each, strict=True):
            m.add_loss(loss, 6)
            m.add_predictions(out, target)
        ended = [i for i, p in enumerate(per_epoch) if (step + 1) % p == 0]
        got = kept.compute(step, by_epoch_length(ended, courses))
        assert sorted(got) == ended
        for i in ended:
            want = alone[i].compute()
            assert got[i].keys() == want.keys()
            # two outputs (the study's): to the last bit; seven: the regression sums of 21 columns at once
            # round apart from RunningMetrics' three sums of 7
            assert got[i] == (want if outputs == 2 else pytest.approx(want, rel=1e-12, abs=1e-12))
            alone[i] = RunningMetrics(infos[i].task, infos[i].num_outputs)  # its next epoch starts empty
            checked += 1
    assert checked == 3 + 2 + 3


def test_an_epoch_longer_than_the_ring_is_refused():
    tasks = MemberTasks([SyntheticTask("direction", img_size=16).info], torch.device("cpu"))
    kept = EpochMetrics(tasks, 2)
    for step in range(3):
        kept.add(step, torch.zeros(1), torch.zeros(1, 4, 2), torch.zeros(1, 4, 1))
    with pytest.raises(ValueError, match="an epoch of 3 steps ending at step 2 is not kept"):
        kept.compute(2, [(3, [0])])
