"""Configs and slot strings: validation messages, overrides, serialisation."""

import json

import pytest

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
