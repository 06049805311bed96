"""A kernel tuning file on disk that cannot be read: warned about once, tuned again and written anew (Triton
alone raises JSONDecodeError on every launch of that shape)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import triton
import triton.compiler.compiler
import triton.language as tl
import triton.runtime.autotuner as autotuner

from vitpos.attention.triton.tuning import tolerant_disk_cache


@triton.jit
def _kernel(x, n: tl.constexpr, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))


@pytest.fixture
def tuner(tmp_path, monkeypatch):
    """A real Triton autotuner whose disk cache lives in ``tmp_path`` (no GPU: the target is a stand-in)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotuner, "driver", SimpleNamespace(active=SimpleNamespace(get_current_target=lambda: "cpu")))
    monkeypatch.setattr(triton.compiler.compiler, "make_backend", lambda target: SimpleNamespace(hash=lambda: "cpu"))
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    made = triton.autotune(configs=configs, key=["n"], cache_results=True)(_kernel)
    return tolerant_disk_cache(made)


def _bench(made, timings):
    def run() -> None:
        made.configs_timings = dict(zip(made.configs, timings, strict=True))
        made.cache[("k",)] = min(made.configs_timings, key=made.configs_timings.get)
        runs.append(1)

    runs: list[int] = []
    return run, runs


def test_an_unreadable_tuning_file_is_tuned_again_and_rewritten(tuner, tmp_path):
    bench, runs = _bench(tuner, [[2.0], [1.0]])
    assert tuner.check_disk_cache(("k",), tuner.configs, bench) is False and runs == [1]  # tuned, then written
    (written,) = tmp_path.rglob("*.autotune.json")
    assert json.loads(written.read_text())["key"] == ["k"]
    tuner.cache.clear()
    assert tuner.check_disk_cache(("k",), tuner.configs, bench) is True and runs == [1]  # read back: no tuning
    written.write_text('{"configs_timings": [[{"kwargs"')  # cut short
    tuner.cache.clear()
    with pytest.warns(RuntimeWarning, match=r"kernel tuning file .*\.autotune\.json cannot be read \(JSONDecodeErr"):
        assert tuner.check_disk_cache(("k",), tuner.configs, bench) is False
    assert runs == [1, 1] and tuner.cache[("k",)].kwargs == {"BLOCK": 32}
    assert json.loads(written.read_text())["key"] == ["k"]  # whole again: the next launch reads it
    tuner.cache.clear()
    assert tuner.check_disk_cache(("k",), tuner.configs, bench) is True and runs == [1, 1]
