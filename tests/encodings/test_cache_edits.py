"""A per-grid cache never outlives the weights it was computed from, even a write through ``param.data``."""

import pytest
import torch

import vitpos
from vitpos.config import PyramidConfig

from ..conftest import TINY, TINY_SWIN

MODELS = {
    "iRPE bias": lambda: vitpos.create_model("vit_lite_7_4", **TINY, relative="irpe:product:bias:qk"),
    "Swin bias": lambda: vitpos.create_model(PyramidConfig(**TINY_SWIN)),
    "Swin bias, LaPE": lambda: vitpos.create_model(PyramidConfig(**TINY_SWIN), join="lape"),
    "RoPE": lambda: vitpos.create_model("vit_lite_7_4", **TINY, relative="rope2d"),
}


@pytest.mark.parametrize("edit", ["param.data.copy_", "param.copy_"])
@pytest.mark.parametrize("name", list(MODELS))
def test_an_edited_weight_is_used_at_once_in_inference(name, edit):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        model(x)  # fills the caches
        for param in model.parameters():
            new = torch.randn_like(param)  # random, non-zero: every table changes
            (param.data if edit == "param.data.copy_" else param).copy_(new)
        edited = model(x)
    fresh = MODELS[name]().eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(edited, fresh(x), rtol=0, atol=0)
