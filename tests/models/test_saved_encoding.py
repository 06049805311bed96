"""Saved position encodings: round trip, the checks on loading, and the trainer's init_pe."""

import pytest
import torch

import vitpos
from vitpos.data import SyntheticTask
from vitpos.engine import TrainConfig, train
from vitpos.models.saved_encoding import load_position_encoding, read_position_metadata, save_position_encoding


@pytest.mark.parametrize("absolute", ["fourier:gamma=4", "learnable_sincos", "learned"])
def test_round_trip_into_a_fresh_model(tmp_path, absolute):
    source = vitpos.create_model("thesis_vit", absolute=absolute)
    with torch.no_grad():
        for p in source.stages[0].absolute.parameters():
            p.add_(torch.randn_like(p))
    path = save_position_encoding(source, tmp_path / "pe.safetensors", tasks=["direction4"])
    target = vitpos.create_model("thesis_vit", absolute=absolute, num_classes=4)
    meta = load_position_encoding(target, path)
    assert (
        meta == read_position_metadata(path) and meta["notes"] == {"tasks": ["direction4"]} and meta["grid"] == (8, 8)
    )
    assert torch.equal(target.stages[0].absolute(target.cfg.grid), source.stages[0].absolute(source.cfg.grid))


def test_fourier_weights_fit_any_grid_and_mismatches_are_clear_errors(tmp_path):
    path = save_position_encoding(vitpos.create_model("thesis_vit", absolute="fourier"), tmp_path / "pe.safetensors")
    load_position_encoding(vitpos.create_model("thesis_vit", absolute="fourier", img_size=48), path)
    with pytest.raises(ValueError, match="holds absolute='fourier' of width 64, but the model has absolute='learned'"):
        load_position_encoding(vitpos.create_model("thesis_vit", absolute="learned"), path)
    with pytest.raises(ValueError, match="has no parameters to save or load"):
        load_position_encoding(vitpos.create_model("thesis_vit", absolute="sincos2d"), path)
    with pytest.raises(FileNotFoundError, match="vitpos pretrain-pe"):
        read_position_metadata(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        read_position_metadata(tmp_path / "junk.safetensors")


def test_a_learned_table_saved_at_another_grid_is_resampled(tmp_path):
    source = vitpos.create_model("thesis_vit", absolute="learned")  # 8x8 grid
    path = save_position_encoding(source, tmp_path / "t.safetensors")
    target = vitpos.create_model("thesis_vit", absolute="learned", img_size=(48, 24))  # 12x6
    load_position_encoding(target, path)
    with torch.no_grad():
        expected = source.stages[0].absolute((12, 6))  # what the source model itself uses on that grid
    torch.testing.assert_close(target.stages[0].absolute.table, expected)
    torch.testing.assert_close(target.stages[0].absolute.prefix(), source.stages[0].absolute.prefix())


def test_trainer_starts_from_a_saved_encoding(tmp_path):
    source = vitpos.create_model("thesis_vit", absolute="fourier", embed_dim=32, num_heads=2)
    with torch.no_grad():
        source.stages[0].absolute.wr.weight.mul_(7.0)
    path = save_position_encoding(source, tmp_path / "pe.safetensors")
    data = SyntheticTask("direction", train=32, val=8, test=8).splits()
    cfg = vitpos.get_config("thesis_vit", absolute="fourier", embed_dim=32, num_heads=2)
    result = train(
        cfg,
        TrainConfig(epochs=1, batch_size=32, lr=0.0, min_lr=0.0, init_pe=str(path), progress=False, device="cpu"),
        data,
    )
    assert torch.equal(
        result.model.stages[0].absolute.wr.weight, source.stages[0].absolute.wr.weight
    )  # lr 0: exactly the saved weights
