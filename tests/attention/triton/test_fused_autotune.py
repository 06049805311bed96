"""The CUDA launch code (autotuned tiles) in the interpreter, through a stand-in for ``triton.autotune``
that does what the real one does: zero the ``reset_to_zero`` arguments, run every configuration,
zero them again, run the chosen one; a known key runs the chosen configuration only. The first
call's output and every gradient equal the float64 literal reference; padded sizes and another batch
size in the same rounded key share a tuning; each GPU benchmarks the configurations kept for it."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
import triton

from vitpos.attention.triton import fused_attention, launch, tuning
from vitpos.attention.triton.kernels import TUNING

from .literal import assert_relative
from .test_fused_op import inputs, literal

B, H = 2, 2


class StandInAutotuner:
    """``triton.autotune(configs, key, reset_to_zero)(kernel)`` as on CUDA, timing nothing."""

    tunings: ClassVar[list[tuple[str, tuple]]] = []
    """(kernel name, key) of every tuning pass, in order."""
    made: ClassVar[list] = []
    """Every autotuner made, in order."""

    def __init__(self, kernel, configs, key, reset_to_zero, options) -> None:
        self.kernel, self.configs, self.key, self.reset_to_zero = kernel, configs, key, reset_to_zero
        self.options = options
        self.made.append(self)
        self.chosen: dict[tuple, triton.Config] = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def check_disk_cache(self, tuning_key, configs, bench_fn) -> bool:
        """Nothing on disk: every tuning is a new one."""
        bench_fn()
        return False

    def _reset(self, named: dict) -> None:
        for name in self.reset_to_zero:
            named[name].zero_()

    def _launch(self, grid, args, kwargs, config: triton.Config) -> None:
        meta = {**kwargs, **config.kwargs}
        self.kernel[grid(meta)](*args, **meta, num_warps=config.num_warps, num_stages=config.num_stages)

    def run(self, grid, args, kwargs) -> None:
        named = {**dict(zip(self.kernel.arg_names, args, strict=False)), **kwargs}
        key = tuple(named[k] for k in self.key) + tuple(str(a.dtype) for a in named.values() if hasattr(a, "dtype"))
        if key not in self.chosen:
            for config in self.configs:
                self._reset(named)
                self._launch(grid, args, kwargs, config)
            self._reset(named)
            self.chosen[key] = self.configs[len(self.configs) // 2]
            self.tunings.append((self.kernel.__name__, key))
        self._launch(grid, args, kwargs, self.chosen[key])


def stand_in_autotune(configs, key, reset_to_zero=None, **options):
    """The stand-in's decorator, in the place of ``triton.autotune``."""
    return lambda kernel: StandInAutotuner(kernel, configs, key, list(reset_to_zero or ()), options)


@pytest.fixture
def autotuned(monkeypatch):
    """Launches take the CUDA branch (autotuned tiles) through the stand-in; its record starts empty."""
    monkeypatch.setattr(triton, "autotune", stand_in_autotune)
    monkeypatch.setattr(launch, "AUTOTUNE", True)
    monkeypatch.setattr(StandInAutotuner, "tunings", [])
    monkeypatch.setattr(StandInAutotuner, "made", [])
    launch._tuned.cache_clear()
    yield StandInAutotuner.tunings
    launch._tuned.cache_clear()


def check_call(n: int, k: int, row_shape, col_shape, bias_shape, maps: int, batch: int = B) -> None:
    """One call of the fused operator against the float64 reference: output and every gradient."""
    shapes = [shape or (1,) for shape in (row_shape, col_shape, bias_shape)]
    qkv, ids, *scores = inputs(n, k, *shapes, maps, batch)
    row, col, bias = (t if shape else None for t, shape in zip(scores, (row_shape, col_shape, bias_shape), strict=True))
    value_table = torch.randn(k, qkv.shape[-1], dtype=torch.float64, requires_grad=True)
    leaves = [t for t in (qkv, row, col, bias, value_table) if t is not None]
    copies = [t.detach().clone().requires_grad_() for t in leaves]  # the reference never sees the call's tensors
    q, keys, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    scale = qkv.shape[-1] ** -0.5
    out, weights = fused_attention(
        q, keys, v, scale, ids, num_buckets=k, row_scores=row, col_scores=col, bias=bias, bucket_weights=True
    )
    assert weights is not None
    out = out.double() + weights.double() @ value_table
    named = dict(zip(("qkv", "row", "col", "bias", "value table"), (qkv, row, col, bias, value_table), strict=True))
    names = [name for name, t in named.items() if t is not None]
    ref = dict(zip(names, copies, strict=True))
    q64, k64, v64 = ref["qkv"].permute(2, 0, 3, 1, 4).unbind(0)
    zero_row = torch.zeros(1, 1, 1, k)
    expected = literal(
        q64, k64, v64, ids, ref.get("row", zero_row), ref.get("col", zero_row.expand(1, 1, n, k)), ref.get("bias"),
        scale, ref["value table"],
    )  # fmt: skip
    assert_relative(out, expected, 1e-5, "out")
    weight = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out * weight).sum(), leaves)
    expected_grads = torch.autograd.grad((expected * weight).sum(), copies)
    for name, got, want in zip(names, grads, expected_grads, strict=True):
        assert_relative(got, want, 1e-5, name)


def test_unused_buffers_on_the_first_call_and_padded_sizes_sharing_its_tuning(autotuned):
    # a bias per bucket shared by every query, no column scores, no dense bias: unused gradient buffers
    check_call(37, 9, (1, H, 1, 9), None, None, 1)
    assert sorted(name for name, _ in autotuned) == ["_backward_kv_kernel", "_backward_q_kernel", "_forward_kernel"]
    check_call(50, 9, (1, H, 1, 9), None, None, 1)  # 37 and 50 tokens: both tuned as 64
    assert len(autotuned) == 3  # no second tuning pass


def test_every_term_and_gradient_on_the_first_call(autotuned):
    # contextual rows and columns, two id maps, a dense bias shared over the batch, a value term
    check_call(37, 9, (B, H, 37, 9), (B, H, 37, 9), (1, H, 37, 37), 2)
    assert len(autotuned) == 3


def test_another_batch_size_in_the_same_rounded_key_reuses_the_first_tuning(autotuned):
    check_call(17, 5, (3, H, 17, 5), None, (1, H, 17, 17), 1, batch=3)  # 3 images x 2 heads: tuned as 8
    assert len(autotuned) == 3 and {key[:3] for _, key in autotuned} == {(8, 32, 32)}
    check_call(20, 5, (4, H, 20, 5), None, (1, H, 20, 20), 1, batch=4)  # 8 (image, head) pairs, 32 tokens
    assert len(autotuned) == 3  # no tuning pass: the first call's choices ran


def test_each_gpu_benchmarks_its_kept_configurations_briefly_and_caches_the_tunings(autotuned, monkeypatch):
    monkeypatch.setattr(launch, "capability", lambda device: (9, 0))
    check_call(17, 5, (1, H, 1, 5), (B, H, 17, 5), None, 1)
    configs = {tuner.kernel.__name__: tuner.configs for tuner in StandInAutotuner.made}
    assert configs == {name: [TUNING[i] for i in kept] for name, kept in tuning.SPILL_FREE[(9, 0)].items()}
    assert all(len(kept) < len(TUNING) for kept in configs.values())
    for tuner in StandInAutotuner.made:
        assert tuner.options == {"do_bench": tuning.brief_bench, "cache_results": True}


def test_a_gpu_without_a_measured_row_benchmarks_the_sm90_spill_free_pair():
    assert tuning.configs_for("_forward_kernel", (8, 0)) == [TUNING[0], TUNING[1]]
    assert tuning.configs_for("_backward_kv_kernel", (9, 0)) == [TUNING[0], TUNING[1], TUNING[3]]
    assert tuning.capability(torch.device("cpu")) == (0, 0)


def test_a_pinned_configuration_is_the_only_one_a_gpu_runs(autotuned, monkeypatch):
    monkeypatch.setattr(launch, "capability", lambda device: (9, 0))
    monkeypatch.setitem(tuning.PINNED, (9, 0), {"_forward_kernel": 2, "_backward_q_kernel": 1})
    check_call(17, 5, (1, H, 1, 5), (B, H, 17, 5), None, 1)
    configs = {tuner.kernel.__name__: tuner.configs for tuner in StandInAutotuner.made}
    assert configs["_forward_kernel"] == [TUNING[2]] and configs["_backward_q_kernel"] == [TUNING[1]]
    assert configs["_backward_kv_kernel"] == [TUNING[i] for i in tuning.SPILL_FREE[(9, 0)]["_backward_kv_kernel"]]
