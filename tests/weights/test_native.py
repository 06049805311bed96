"""vitpos's own state dicts load into every kind of vitpos model, whatever prefix its host has."""

import pytest
import torch

import vitpos


@pytest.mark.parametrize("name", ["thesis_vit", "detr_tiny_sine", "pvt_tiny_fpn"])
def test_a_vitpos_state_dict_loads_into_another_instance(name):
    torch.manual_seed(0)
    source = vitpos.create_model(name)
    torch.manual_seed(1)
    target = vitpos.create_model(name)
    assert not all(torch.equal(v, target.state_dict()[k]) for k, v in source.state_dict().items())
    result = vitpos.load_weights(target, source.state_dict())
    assert result.layout == "vitpos"
    assert all(torch.equal(v, target.state_dict()[k]) for k, v in source.state_dict().items())
