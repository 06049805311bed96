"""DETR on vitpos hosts: a classifier's released checkpoint (PVT's layout) loads into the backbone,
the chosen stage feeds the encoder, the config round-trips, and the presets' sizes add up."""

import pytest
import torch

import vitpos
from vitpos.errors import CheckpointError, ConfigError
from vitpos.models.factory import config_from_dict, create_model, get_config
from vitpos.tasks.detection import DetrConfig

from ...weights import layouts
from ...weights.conftest import save_pth

DIMS, DEPTHS, HEADS, SR = (8, 16), (1, 2), (1, 2), (2, 1)
PVT_SMALL = dict(embed_dims=DIMS, depths=DEPTHS, num_heads=HEADS, mlp_ratios=(2.0, 2.0), sr_ratios=SR, img_size=32)
DETR_SMALL = dict(embed_dim=16, num_heads=2, enc_depth=1, dec_depth=1, num_queries=3, num_classes=2, img_size=32)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Small models run faster on one thread where cores are shared."""


def pvt_checkpoint(tmp_path):
    sd = layouts.pvt(layouts.Filler(7), DIMS, DEPTHS, HEADS, (2.0, 2.0), SR, patch=4, img=32, classes=5)
    return save_pth(sd, tmp_path / "pvt_v1.pth")


def small_detr(stage: int = -1) -> DetrConfig:
    return DetrConfig.on(get_config("pvt_tiny", **PVT_SMALL), stage, **DETR_SMALL)


def test_a_released_pvt_checkpoint_loads_into_the_backbone(tmp_path):
    path = pvt_checkpoint(tmp_path)
    detr = vitpos.create_model(small_detr(), checkpoint=path).double().eval()
    classifier = vitpos.create_model("pvt_tiny", checkpoint=path, **PVT_SMALL, num_classes=5).double().eval()
    x = torch.randn(2, 3, 32, 48, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ours, theirs = detr.backbone(x), classifier.forward_features(x)[-1]
    assert ours.shape == theirs.shape == (2, 16, 4, 6)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert theirs.abs().max() > 1e-3
    # the same weights through vitpos.load_weights (vitpos train --init), the classifier left out
    fresh = create_model(small_detr())
    vitpos.load_weights(fresh.pretrained_host, path, drop=("head",))
    for name, value in fresh.backbone.state_dict().items():
        assert torch.equal(value, detr.backbone.state_dict()[name].float()), name


def test_a_checkpoint_of_another_family_is_refused(tmp_path):
    sd = layouts.swin(
        layouts.Filler(3), (8, 16), (2, 2), (2, 2), window=4, patch=2, img=16, classes=5, style="microsoft"
    )
    with pytest.raises(CheckpointError, match="cannot load into a 'pvt' model"):
        vitpos.create_model(small_detr(), checkpoint=save_pth(sd, tmp_path / "swin.pth"))


@pytest.mark.parametrize("stage, stride", [(-1, 8), (1, 8), (0, 4)])
def test_the_chosen_stage_feeds_the_encoder_at_any_grid(stage, stride):
    detr = create_model(small_detr(stage)).eval()
    assert detr.cfg.patch_size == stride
    for h, w in [(32, 32), (24, 40)]:
        out = detr(torch.randn(1, 3, h, w))
        assert out["pred_boxes"].shape == (1, 3, 4) and out["pred_logits"].shape == (1, 3, 3)
        assert detr.forward_features(torch.randn(1, 3, h, w))[0].shape == (1, 16, h // stride, w // stride)


def test_config_round_trips_and_checks_the_stage():
    cfg = small_detr(0)
    assert config_from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="has 2 stage"):
        cfg.replace(backbone_stage=2)
    with pytest.raises(ConfigError, match="set patch_size=4"):
        cfg.replace(patch_size=8)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("preset, host", [("detr_pvt_tiny", "pvt_tiny"), ("detr_swin_tiny", "swin_tiny")])
def test_presets_are_detr_r50s_transformer_on_the_host(preset, host):
    with torch.device("meta"):
        detr, backbone, r50 = create_model(preset), create_model(host, num_classes=0), create_model("detr_r50_shapes")
    channels = backbone.cfg.embed_dims[-1]
    stem = count(r50.backbone) + count(r50.input_proj)
    assert count(detr) == count(backbone) + count(r50) - stem + channels * 256 + 256
    assert detr.cfg.patch_size == 32 and detr.cfg.num_queries == 100 and detr.cfg.position.absolute == "sine"


@pytest.mark.parametrize("host", ["pvt_tiny", "pvt_tiny_peg_gap"])
def test_a_padded_image_gives_the_detections_it_gives_alone(host):
    cfg = DetrConfig.on(get_config(host, **PVT_SMALL), **DETR_SMALL)
    torch.manual_seed(0)
    detr = create_model(cfg).double().eval()
    x = torch.randn(1, 3, 24, 40, dtype=torch.float64)
    padded = torch.zeros(2, 3, 40, 48, dtype=torch.float64)
    padded[0, :, :24, :40], padded[1] = x[0], torch.randn(3, 40, 48, dtype=torch.float64)
    mask = torch.ones(2, 40, 48, dtype=torch.bool)
    mask[0, :24, :40], mask[1] = False, False
    alone, batch = detr(x), detr(padded, padding_mask=mask)
    for key in ("pred_logits", "pred_boxes"):
        torch.testing.assert_close(batch[key][:1], alone[key], rtol=1e-9, atol=1e-10)
    assert not torch.allclose(detr(padded)["pred_boxes"][:1], alone["pred_boxes"])  # the mask is what does it


def test_training_starts_the_backbone_from_the_checkpoint(tmp_path, mixed):
    from vitpos.engine import RunRequest
    from vitpos.engine.train import train

    path = pvt_checkpoint(tmp_path)
    options = {"data": f"coco:{mixed}", "epochs": 1, "batch_size": 4, "lr": 0.0, "min_lr": 0.0,
               "warmup_epochs": 0, "progress": False, "device": "cpu", "init": str(path)}  # fmt: skip
    _, train_cfg, data = RunRequest("detr_tiny_sine", {"img_size": 32}, options).resolve()
    result = train(small_detr().replace(num_classes=2), train_cfg, data)
    assert {"val_AP", "val_AP50"} <= set(result.history[-1])
    loaded = vitpos.create_model(small_detr().replace(num_classes=2), checkpoint=path)
    for name, value in loaded.backbone.state_dict().items():  # lr 0: the weights are the checkpoint's
        assert torch.equal(result.model.backbone.state_dict()[name], value), name
