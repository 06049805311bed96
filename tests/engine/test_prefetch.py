"""Prefetched device batches: the same batches, in the same order, and the same randomness for the step."""

import torch

from vitpos.data.randaugment import RandAugment
from vitpos.data.transforms import Augment
from vitpos.engine.prefetch import DeviceBatches

SEED = 11


def _host_batches(n=5, b=6):
    g = torch.Generator().manual_seed(0)
    return [
        (torch.randint(0, 256, (b, 3, 16, 16), dtype=torch.uint8, generator=g), torch.randint(0, 4, (b,), generator=g))
        for _ in range(n)
    ]


def _augment():
    return Augment(
        (0.5,) * 3,
        (0.25,) * 3,
        num_classes=4,
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        label_smoothing=0.1,
        randaugment=RandAugment.from_spec("rand-m9-mstd0.5-inc1"),
        erasing=0.25,
    )


def test_prefetched_batches_and_the_steps_randomness_equal_the_plain_loop():
    host, augment = _host_batches(), _augment()
    plain = []
    for k, (images, labels) in enumerate(host):  # the training loop without prefetching
        torch.manual_seed(SEED + k)
        x, y = augment(images, labels)
        plain.append((x, y, labels, torch.rand(3)))  # the step's own draws (dropout) follow the augmentation's
    batches = DeviceBatches(host, augment, torch.device("cpu"), lambda k: SEED + k)
    got = [(x, y, labels, torch.rand(3)) for x, y, labels in batches]
    assert len(got) == len(plain)
    for mine, theirs in zip(got, plain, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert torch.equal(a, b)
    assert not torch.equal(got[0][0], got[1][0])  # batches differ: each its own seed
    assert torch.equal(host[0][0], _host_batches()[0][0])  # the loaded batches are left as they were


def test_slow_loading_is_reported_with_its_share():
    lines = []

    def work():
        start = torch.randn(200, 200)
        for _ in range(20):
            start = start @ start.clamp(-1, 1) / 200

    def slow():
        for batch in _host_batches(3):
            work()  # the loading: far slower than the empty step below
            yield batch

    batches = DeviceBatches(slow(), lambda x, y: (x, y), torch.device("cpu"), lambda k: k, lines.append, "2 workers")
    assert len(list(batches)) == 3 and batches.waited_s > 0
    assert len(lines) == 1 and "data loading is the bottleneck" in lines[0] and "2 workers" in lines[0]
    share = int(lines[0].split("(")[1].split("%")[0])
    assert 10 <= share <= 100
    quiet = []
    for _ in DeviceBatches(_host_batches(3), lambda x, y: (x, y), torch.device("cpu"), lambda k: k, quiet.append):
        work()  # a step far slower than taking a batch from a list
    assert quiet == []
