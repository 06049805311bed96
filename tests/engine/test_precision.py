"""Mixed precision in the engine: autocast on CUDA, on CPU on request, fp16 with a gradient scaler on CUDA."""

import math

import pytest
import torch

from vitpos.engine import train
from vitpos.engine.config import TrainConfig
from vitpos.engine.precision import Precision

from .conftest import tiny_request, without_times


def test_which_device_and_dtype_autocast():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert Precision.for_run(True, "bfloat16", False, cuda).enabled
    assert not Precision.for_run(True, "bfloat16", False, cpu).enabled  # CPU only on request
    assert Precision.for_run(True, "float16", True, cpu) == Precision("cpu", torch.float16, True)
    assert not Precision.for_run(False, "bfloat16", True, cpu).enabled
    assert Precision.for_run(True, "float16", False, cuda).scales_gradients
    assert not Precision.for_run(True, "bfloat16", False, cuda).scales_gradients
    assert not Precision.for_run(True, "float16", True, cpu).scales_gradients
    assert not Precision.for_run(True, "float16", True, cpu).scaler().is_enabled()


def test_an_unknown_amp_dtype_is_refused():
    with pytest.raises(ValueError, match="amp_dtype must be bfloat16 or float16, got 'float8'"):
        TrainConfig(amp_dtype="float8")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cpu_autocast_trains_a_relative_encoding(dtype):
    overrides = dict(n=128, epochs=1, model={"relative": "irpe:product:bias:qk"})
    plain = train(*tiny_request(**overrides).resolve())
    mixed = train(*tiny_request(**overrides, cpu_amp=True, amp_dtype=dtype).resolve())
    assert all(math.isfinite(v) for row in mixed.history for v in row.values() if isinstance(v, float))
    assert without_times(mixed.history) != without_times(plain.history)  # autocast did run
    assert mixed.history[-1]["train_loss"] == pytest.approx(plain.history[-1]["train_loss"], rel=0.05)
