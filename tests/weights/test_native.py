"""vitpos's own state dicts load into every kind of vitpos model, whatever prefix its host has."""

import pytest
import torch

import vitpos
from vitpos.weights import write_checkpoint


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


TINY = dict(embed_dim=32, depth=2, num_heads=2, num_classes=5)


@pytest.mark.parametrize("slots", [{}, {"join": "unshared"}, {"absolute": "learned:noprefix"}], ids=str)
@pytest.mark.parametrize("size", [320, (224, 320)], ids=str)
def test_a_checkpoint_saved_at_224_loads_into_a_larger_model(tmp_path, slots, size):
    torch.manual_seed(0)
    small = vitpos.create_model("deit_tiny_patch16_224", **TINY, **slots).eval()
    folder = write_checkpoint(small, tmp_path / "ck")
    x = torch.randn(1, 3, *((size, size) if isinstance(size, int) else size))
    larger = vitpos.create_model(None, checkpoint=folder, img_size=size).eval()
    built = vitpos.create_model("deit_tiny_patch16_224", **TINY, **slots, img_size=size).eval()
    assert vitpos.load_weights(built, folder, resize="model").layout == "vitpos"
    with torch.no_grad():  # the table resampled once on load is the one the small model resamples at run time
        assert torch.equal(larger(x), small(x)) and torch.equal(built(x), small(x))
    with pytest.raises(vitpos.CheckpointError, match=r"stored for a 14x14 grid.*keep_grid=True"):
        vitpos.load_weights(built, folder, resample=False)
