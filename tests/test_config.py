"""Configs and slot strings: validation messages, overrides, serialisation."""

import dataclasses
import json

import pytest
import torch

import vitpos
from vitpos import ModelConfig, PositionConfig, SlotSpec, SpecError


@pytest.mark.parametrize(
    "text", ["learned", "fourier:gamma=10", "peg@0-5:k=3", "irpe:product:ctx:k", "peg@-1:dw*4:k=27", "lape:eta=3"]
)
def test_slot_strings_round_trip(text):
    assert str(SlotSpec.parse(text)) == text
    assert SlotSpec.parse(str(SlotSpec.parse(text))) == SlotSpec.parse(text)


@pytest.mark.parametrize("text", ["", ":k", "peg@", "irpe::k", "a:=3", "a:k="])
def test_bad_slot_strings(text):
    with pytest.raises(SpecError):
        SlotSpec.parse(text)


@pytest.mark.parametrize(
    "slot,value,pattern",
    [
        ("absolute", "learnt", r"unknown absolute encoding 'learnt'; valid values: fourier, learnable_sincos, learned"),
        ("join", "everywhere", r"unknown join 'everywhere'; valid values: .*input"),
        ("conditional", "cnn", r"unknown conditional encoding 'cnn'; valid values: .*none"),
        ("relative", "t5", r"unknown relative encoding 't5'; valid values: .*none"),
        ("absolute", "learned:k=3", r"unknown option 'k'"),
        ("absolute", "sincos2d@3", r"takes no '@' placement"),
        ("absolute", "fourier:gamma=abc", r"gamma='abc' is invalid"),
    ],
)
def test_unknown_slot_values_list_valid_ones(slot, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        PositionConfig(**{slot: value})


def test_overrides_by_slot_string_and_field():
    cfg = vitpos.get_config("deit_tiny_patch16_224", absolute="sincos2d", head="gap", num_classes=10)
    assert cfg.position.absolute == "sincos2d" and cfg.head == "gap" and not cfg.class_token
    assert vitpos.get_config("deit_tiny_patch16_224").position.absolute == "learned"  # preset untouched
    with pytest.raises(TypeError, match=r"unknown model option.*embed_dims"):
        vitpos.get_config("deit_tiny_patch16_224", embed_dims=3)
    with pytest.raises(ValueError, match="unknown model 'deit_huge'"):
        vitpos.create_model("deit_huge")


def test_model_config_validation_messages():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        ModelConfig(embed_dim=100, num_heads=3)
    with pytest.raises(ValueError, match=r"not divisible by patch_size 16.*pad_to_patch"):
        ModelConfig(img_size=100)
    with pytest.raises(ValueError, match=r"head = 'max'.*expected one of cls, gap"):
        ModelConfig(head="max")
    with pytest.raises(ValueError, match="needs class_token=True"):
        ModelConfig(head="cls", class_token=False)


def test_config_serialises_to_json_and_back():
    cfg = vitpos.get_config("vit_lite_7_4", absolute="fourier:gamma=2", img_size=(32, 48))
    data = json.loads(json.dumps(cfg.to_dict()))
    assert ModelConfig.from_dict(data) == cfg
    with pytest.raises(ValueError, match="unknown model config key"):
        ModelConfig.from_dict({**data, "depthh": 3})


def _expected_options(slot, text):
    from vitpos.encodings.peg import PegForm
    from vitpos.encodings.relative.irpe import IRPEOptions

    return {
        "fourier:gamma=4:dim=8": {"gamma": 4.0, "dim": 8},
        "lape:chained:eta=2": {"chained": True, "eta": 2},
        "peg@-1,0-2:dense*2:k=5:pad=reflect": {
            "positions": (-1, 0, 1),  # 0-2: blocks 0 and 1
            "form": PegForm(conv="dense", stacked=2, kernel=5, pad="reflect"),
        },
        "irpe:quant:bias:qk:unshared:squared:ratio=3": dataclasses.asdict(
            IRPEOptions(method="quant", mode="bias", on="qk", shared=False, quant="squared", ratio=3.0)
        ),
        "rope2d:mixed:theta=50": {"variant": "mixed", "theta": 50.0},
        "shaw:max_dist=2": {"max_dist": 2},
    }[text]


@pytest.mark.parametrize(
    "slot,text",
    [
        ("absolute", "fourier:gamma=4:dim=8"),
        ("join", "lape:chained:eta=2"),
        ("conditional", "peg@-1,0-2:dense*2:k=5:pad=reflect"),
        ("relative", "irpe:quant:bias:qk:unshared:squared:ratio=3"),
        ("relative", "rope2d:mixed:theta=50"),
        ("relative", "shaw:max_dist=2"),
    ],
)
def test_a_slot_string_is_read_once_into_typed_options_and_prints_back(slot, text):
    position = PositionConfig(**{slot: text})
    resolved = position.slot(slot)
    assert dict(resolved.options) == _expected_options(slot, text)
    assert str(resolved.spec) == getattr(position, slot) == text
    assert PositionConfig(**position.to_dict()) == position


def test_building_a_model_reads_no_slot_string_again(monkeypatch):
    from vitpos.encodings.relative.irpe import IRPEOptions

    cfg = vitpos.get_config("deit_tiny_patch16_224", relative="irpe:product:ctx:qkv", depth=4)
    reads = []
    monkeypatch.setattr(IRPEOptions, "from_spec", classmethod(lambda cls, spec: reads.append(spec)))
    monkeypatch.setattr(SlotSpec, "parse", classmethod(lambda cls, text: reads.append(text)))
    model = vitpos.create_model(cfg)
    assert reads == []
    tables = [block.attn.relative.table_v.shape for block in model.stages[0].blocks]
    assert tables == [(50, 64)] * 4  # every block built from the options read once


@pytest.mark.parametrize(
    "name,strides,grids,prefix,relative_grids",
    [
        ("deit_tiny_patch16_224", [16], [(14, 14)], [1], [(14, 14)]),
        ("pvt_tiny", [4, 8, 16, 32], [(56, 56), (28, 28), (14, 14), (7, 7)], [0, 0, 0, 1], None),
        ("swin_tiny", [4, 8, 16, 32], [(56, 56), (28, 28), (14, 14), (7, 7)], [0, 0, 0, 0], [(7, 7)] * 4),
        ("detr_tiny_sine", [4], [(8, 8)], [0], [(8, 8)]),
    ],
)
def test_each_host_config_computes_its_stage_geometry_once(name, strides, grids, prefix, relative_grids):
    cfg = vitpos.get_config(name)
    assert [s.stride for s in cfg.stages] == strides and cfg.stride == strides[-1]
    assert [s.context.grid for s in cfg.stages] == grids == [cfg.stage_grid(i) for i in range(cfg.num_stages)]
    assert [s.context.num_prefix_tokens for s in cfg.stages] == prefix
    assert [s.relative_context.grid for s in cfg.stages] == (relative_grids or grids)
    assert cfg.stages is cfg.stages  # computed at validation, not per read
    with torch.device("meta"):  # the structure, without allocating or initialising full-size weights
        model = cfg.build()
        assert type(model) is type(vitpos.create_model(name)) and model.cfg is cfg
    assert [stage.num_prefix_tokens for stage in model.stages] == prefix
