"""Prefetched device batches: the same batches, in the same order, and the same randomness for the step."""

import torch

from vitpos.data.randaugment import RandAugment
from vitpos.data.transforms import Augment
from vitpos.engine import prefetch
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


class Clock:
    """``time.perf_counter`` for the prefetcher: seconds pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _batches_taking(clock: Clock, seconds: float, count: int = 3):
    for batch in _host_batches(count):
        clock.now += seconds  # the loading
        yield batch


def test_slow_loading_is_reported_with_its_share_in_an_epoch_long_enough_to_matter(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(prefetch.time, "perf_counter", clock)
    lines: list[str] = []

    def epoch(load_s: float, step_s: float) -> None:
        batches = DeviceBatches(
            _batches_taking(clock, load_s),
            lambda x, y: (x, y),
            torch.device("cpu"),
            lambda k: k,
            lines.append,
            "2 workers",
        )
        for _ in batches:
            clock.now += step_s

    epoch(load_s=3.0, step_s=1.0)  # 9 s of a 12 s epoch waiting
    assert lines == [
        "data loading is the bottleneck: 9.0 s of this epoch's 12.0 s (75%) went to waiting for batches from "
        "2 workers; more loading workers (--workers, one per free core) would feed the step faster"
    ]
    assert prefetch.MIN_EPOCH_S == 10.0
    epoch(load_s=2.0, step_s=1.0)  # the same share of a 9 s epoch: too short to matter
    epoch(load_s=0.3, step_s=4.0)  # a 12.9 s epoch, 7% of it waiting: below the 10% that is reported
    assert len(lines) == 1
