"""The members' splits as one tensor: each member's batch by one index, a split shared by members held once."""

import torch

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.stack_data import MemberSplits
from vitpos.engine.stack_metrics import MemberTasks


def _train(task: str, seed: int, n: int):
    return SyntheticTask(task, img_size=16, square_size=4, train=n, val=4, test=4, seed=seed).splits().train


def test_a_split_shared_by_members_is_held_once_and_each_member_reads_its_own():
    """Members 0 and 2 share one split object (a run and its longer twin): its 6 images are held once (6 + 10
    rows, a padding row on the first member's), and every member's batch is its own split's samples."""
    shared, other = _train("direction", 0, 6), _train("distance", 1, 10)
    datasets = [shared, other, shared]
    tasks = MemberTasks([d.info for d in datasets], torch.device("cpu"))
    splits = MemberSplits(datasets, tasks, torch.device("cpu"), rows=4)
    assert len(splits.images) == 16 and splits.offsets.tolist() == [0, 6, 0, 0]
    local = torch.tensor([[5, 0], [9, 3], [1, 2]])
    images, targets = splits.batch(splits.global_index(local))
    for member, dataset in enumerate(datasets):
        x, y = dataset[local[member]]
        assert torch.equal(images[member], x)
        assert torch.equal(targets[member, :, : y.view(2, -1).shape[1]], y.float().view(2, -1))
