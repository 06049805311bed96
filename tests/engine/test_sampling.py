"""Repeated augmentation over processes, and per-image views that replay exactly."""

import numpy as np
import torch

from vitpos.data.crops import TrainCrop
from vitpos.data.dataset import DataInfo, TensorImages, iterate_batches
from vitpos.data.views import AugmentedViews
from vitpos.engine.distributed import Dist, epoch_batches
from vitpos.engine.sampling import rank_batches


def test_repeated_augmentation_gives_each_image_three_times_over_two_ranks():
    n, batch = 96, 12
    ranks = [rank_batches(n, batch, seed=1, epoch=4, ctx=Dist(r, 2), repeats=3) for r in range(2)]
    assert [len(r) for r in ranks] == [n // batch] * 2  # the epoch keeps the length of one pass
    positions = torch.cat([p for rank in ranks for _, p in rank])
    assert sorted(positions.tolist()) == list(range(n))  # no position twice, none left out: no overlap
    indices = torch.cat([i for rank in ranks for i, _ in rank])
    counts = torch.bincount(indices, minlength=n)
    assert set(counts.tolist()) == {0, 3} and int((counts == 3).sum()) == n // 3
    for image in torch.nonzero(counts).flatten().tolist():  # the copies of each image go to both ranks
        assert {r for r, rank in enumerate(ranks) for i, _ in rank if image in i.tolist()} == {0, 1}
    other = rank_batches(n, batch, seed=1, epoch=5, ctx=Dist(0, 2), repeats=3)
    assert not torch.equal(other[0][0], ranks[0][0][0])  # a new order each epoch


def test_without_repeats_each_global_batch_is_the_plain_shuffles():
    one = rank_batches(100, 16, seed=3, epoch=2, ctx=Dist())
    plain = epoch_batches(100, 16, seed=3, epoch=2, ctx=Dist())
    assert all(torch.equal(i, p) for (i, _), p in zip(one, plain, strict=True))
    two = [rank_batches(100, 16, seed=3, epoch=2, ctx=Dist(r, 2)) for r in range(2)]
    for t, batch in enumerate(plain):  # the same global batch, taken in turns by the two ranks
        assert sorted(torch.cat([two[0][t][0], two[1][t][0]]).tolist()) == sorted(batch.tolist())


def test_views_are_the_same_in_a_worker_and_on_resume():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (24, 3, 20, 28), dtype=torch.uint8, generator=g)
    split = TensorImages(images, torch.arange(24), DataInfo("t", "classification", classes=tuple("ab")))
    views = AugmentedViews(split, TrainCrop((8, 8)), seed=7, epoch=1)
    keys = rank_batches(24, 6, seed=7, epoch=1, ctx=Dist(), repeats=3)
    here = list(iterate_batches(views, keys))
    in_worker = list(iterate_batches(views, keys, workers=1))
    resumed = list(iterate_batches(AugmentedViews(split, TrainCrop((8, 8)), seed=7, epoch=1), keys[2:]))
    for (a, ya), (b, yb) in zip(here, in_worker, strict=True):
        assert torch.equal(a, b) and torch.equal(ya, yb)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(here[2:], resumed, strict=True))
    # the three copies of an image are three different views of it
    first = keys[0][0].tolist()
    assert first[0] == first[1] == first[2] and not torch.equal(here[0][0][0], here[0][0][1])
    assert np.array_equal(here[0][1].numpy(), keys[0][0].numpy())
