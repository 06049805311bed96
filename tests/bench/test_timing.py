"""The benchmark's paired overheads, on a fake clock: the pairing cancels drift exactly."""

import pytest

from bench import timing


class FakeClock:
    """perf_counter that advances only when a fake step runs; ``drift`` slows every later step."""

    def __init__(self, drift: float = 0.0) -> None:
        self.now, self.drift, self.calls = 0.0, drift, 0

    def __call__(self) -> float:
        return self.now

    def step(self, cost: float):
        def run() -> None:
            self.calls += 1
            self.now += cost * (1.0 + self.drift * self.calls)

        return run


@pytest.mark.parametrize("drift", [0.0, 0.002])
def test_paired_overheads_recover_the_cost_ratio(monkeypatch, drift):
    clock = FakeClock(drift)
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    steps = {"base": clock.step(1.0), "cheap": clock.step(1.01), "dear": clock.step(1.25)}
    throughput, overheads = timing.paired_overheads(steps, "base", batch=4, warmup=1, repeats=5, iters=2)
    assert overheads["base"].median == 0.0
    # under a linear drift the mean of the two neighbours is the baseline at the case's own time
    for label, cost in (("cheap", 0.01), ("dear", 0.25)):
        assert overheads[label].low == pytest.approx(cost, abs=1e-9)
        assert overheads[label].high == pytest.approx(cost, abs=1e-9)
    if drift == 0.0:
        assert throughput["dear"].median == pytest.approx(4 / 1.25)
    assert clock.calls == 3 * 1 + 5 * 2 * (1 + 2 * 2)  # warm-up, then per round B c B c B


def test_unpaired_medians_are_fooled_by_drift(monkeypatch):
    """The reason for pairing: two equal steps timed in turn under drift differ in their medians."""
    clock = FakeClock(drift=0.01)
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    steps = {"base": clock.step(1.0), "same": clock.step(1.0)}
    unpaired = timing.interleaved_throughput(steps, 1, warmup=0, repeats=6, iters=1)
    assert unpaired["base"].median != pytest.approx(unpaired["same"].median, rel=1e-3)
    _, paired = timing.paired_overheads(steps, "base", batch=1, warmup=0, repeats=6, iters=1)
    assert paired["same"].median == pytest.approx(0.0, abs=1e-9)
