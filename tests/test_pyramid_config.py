"""PyramidConfig: validation messages, overrides, per-stage grids, serialisation."""

import json

import pytest
import yaml

import vitpos
from vitpos import PyramidConfig

from .conftest import TINY_PVT, TINY_SWIN


def test_stage_grids_and_stride():
    cfg = vitpos.get_config("pvt_tiny")
    assert cfg.stride == 32 and cfg.num_stages == 4
    assert [cfg.stage_grid(s) for s in range(4)] == [(56, 56), (28, 28), (14, 14), (7, 7)]
    assert cfg.stage_grid(1, (64, 96)) == (8, 12)
    assert [cfg.stage_prefix_tokens(s) for s in range(4)] == [0, 0, 0, 1]
    assert vitpos.get_config("pvt_tiny_peg_gap").num_prefix_tokens == 0


@pytest.mark.parametrize(
    "overrides,pattern",
    [
        (dict(depths=(2, 2, 2)), r"one entry per stage.*depths=3"),
        (dict(num_heads=(1, 2, 6, 8)), r"stage 2: width 320 is not divisible by 6 heads"),
        (dict(img_size=200), r"not divisible by the total stride 32.*multiple of 32"),
        (dict(arch="vit"), r"arch = 'vit'.*expected one of pvt, swin"),
        (dict(window_size=7), r"arch='pvt' attends globally; window_size"),
        (dict(relative="none", head="max"), r"head = 'max'.*expected one of cls, gap"),
        (
            dict(mlp_ratios=(8.0, 0.0, 4.0, 4.0)),
            r"mlp_ratios = \(8.0, 0.0, 4.0, 4.0\).*expected a list of one or more numbers > 0",
        ),
    ],
)
def test_pvt_validation_messages(overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        vitpos.get_config("pvt_tiny", **overrides)


def test_swin_validation_messages():
    with pytest.raises(ValueError, match="needs a positive window_size"):
        PyramidConfig(**{**TINY_SWIN, "window_size": None})
    with pytest.raises(ValueError, match="no spatial reduction; set sr_ratios=None"):
        PyramidConfig(**TINY_SWIN, sr_ratios=(2, 1, 1, 1))
    with pytest.raises(ValueError, match=r"no class token.*head='gap'"):
        PyramidConfig(**TINY_SWIN, head="cls")


def test_relative_encodings_need_keys_on_the_query_grid():
    with pytest.raises(ValueError, match=r"stage\(s\) 0, 1 on a coarser grid.*sr_ratios=None"):
        PyramidConfig(**TINY_PVT, position={"relative": "swin"})


def test_unknown_override_lists_valid_options():
    with pytest.raises(TypeError, match=r"unknown model option.*embed_dim.*valid options: .*embed_dims"):
        vitpos.get_config("pvt_tiny", embed_dim=3)


def test_config_round_trips_through_json_and_yaml():
    cfg = vitpos.get_config("pvt_small_peg_gap", img_size=(224, 320), num_classes=10)
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["depths"] == [3, 4, 6, 3]
    assert PyramidConfig.from_dict(data) == cfg
    assert PyramidConfig.from_dict(yaml.safe_load(yaml.safe_dump(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="unknown model config key"):
        PyramidConfig.from_dict({**data, "depth": 3})


def test_presets_take_slot_overrides_without_changing_the_preset():
    cfg = vitpos.get_config("pvt_tiny", absolute="sincos2d", conditional="peg@0", head="gap")
    assert (cfg.position.absolute, cfg.position.conditional, cfg.class_token) == ("sincos2d", "peg@0", False)
    assert vitpos.get_config("pvt_tiny").position.absolute == "learned"


def test_pyramid_config_builds_the_config_of_its_arch():
    pvt = PyramidConfig(**TINY_PVT)
    swin = PyramidConfig(**TINY_SWIN, sr_ratios=None)  # the earlier shared config's None is accepted
    assert type(pvt) is vitpos.PVTConfig and type(swin) is vitpos.SwinConfig
    assert isinstance(pvt, PyramidConfig) and isinstance(swin, PyramidConfig)
    assert not hasattr(pvt, "window_size") and not hasattr(swin, "sr_ratios")
    assert swin == vitpos.SwinConfig(**{k: v for k, v in TINY_SWIN.items() if k != "arch"})


def test_configs_saved_with_the_shared_pyramid_fields_load_as_their_host():
    from vitpos.models.factory import config_from_dict

    for host, foreign in ((TINY_PVT, "window_size"), (TINY_SWIN, "sr_ratios")):
        saved = {**PyramidConfig(**host).to_dict(), foreign: None}  # as PyramidConfig wrote it
        cfg = config_from_dict(saved)
        assert type(cfg).__name__ == {"pvt": "PVTConfig", "swin": "SwinConfig"}[host["arch"]]
        assert cfg == PyramidConfig(**host) == PyramidConfig.from_dict(saved)
        with pytest.raises(ValueError, match=f"set {foreign}=None|{foreign} is for arch"):
            config_from_dict({**saved, foreign: 2})
