"""Every host satisfies the Host protocol the tools rely on."""

from __future__ import annotations

import pytest
import torch

import vitpos
from vitpos.models.host import HOST_MEMBERS, Host, is_host
from vitpos.tasks.pyramid_head import PyramidHeadModel

from ..conftest import TINY, TINY_PVT, TINY_SWIN

SMALL = {
    "vit": dict(TINY, reg_tokens=2, relative="irpe:product:bias", conditional="peg@0"),
    "pvt": TINY_PVT,
    "swin": TINY_SWIN,
}
"""One small model of each host, with parameters in every slot it can hold."""


@pytest.mark.parametrize("name", vitpos.list_models())
def test_every_preset_is_a_host(name: str) -> None:
    with torch.device("meta"):
        model = vitpos.create_model(name)
    if isinstance(model, PyramidHeadModel):  # a segmenter or RetinaNet is not a host: it holds one
        model = model.backbone
    assert is_host(model)
    cfg = model.cfg
    assert len(model.stages) == cfg.num_stages == len(cfg.embed_dims)
    assert model.num_features == cfg.embed_dims[-1]
    assert model.num_prefix_tokens == cfg.num_prefix_tokens == cfg.stage_prefix_tokens(cfg.num_stages - 1)
    assert [cfg.stage_grid(s) for s in range(cfg.num_stages)] == cfg.stage_grids(cfg.image_hw)


def small(arch: str) -> torch.nn.Module:
    options = dict(SMALL[arch])
    base = "vit_lite_7_4" if arch == "vit" else ("pvt_tiny" if arch == "pvt" else "swin_tiny")
    return vitpos.create_model(base, **options)


@pytest.mark.parametrize("arch", SMALL)
@pytest.mark.parametrize("size", [(32, 32), (48, 16)])
def test_tokens_grids_and_logits_agree(arch: str, size: tuple[int, int]) -> None:
    model = small(arch).eval()
    x = torch.randn(2, 3, *size)
    grids = model.stage_grids(size)
    tokens = model.forward_tokens(x)
    h, w = grids[-1]
    assert tokens.shape == (2, model.num_prefix_tokens + h * w, model.num_features)
    torch.testing.assert_close(model(x), model.forward_head(tokens))
    assert model.forward_head(tokens, pre_logits=True).shape == (2, model.num_features)


@pytest.mark.parametrize("arch", SMALL)
def test_stride_does_not_fit_is_a_clear_error(arch: str) -> None:
    model = small(arch)
    stride = model.cfg.stride
    with pytest.raises(ValueError, match=str(stride)):
        model.stage_grids((stride * 2 + 1, stride * 2))


@pytest.mark.parametrize("arch", SMALL)
def test_position_parameters_are_the_slots_and_exempt_from_decay(arch: str) -> None:
    model = small(arch)
    position = model.position_parameters()
    assert position, "every small host holds position parameters"
    named = dict(model.named_parameters())
    assert all(named[n] is p for n, p in position.items())
    slot_owned = {
        f"stages.{s}.{slot}.{n}"
        for s, stage in enumerate(model.stages)
        for slot in ("absolute", "join", "conditional")
        if getattr(stage, slot) is not None
        for n, _ in getattr(stage, slot).named_parameters()
    }
    relative = {n for n in named if ".attn.relative." in n}
    assert set(position) == slot_owned | relative
    prefix = {n for n in named if n in ("cls_token", "reg_token")}
    assert model.no_weight_decay() == set(position) | prefix


def test_is_host_checks_every_name_the_protocol_declares() -> None:
    declared = set(Host.__annotations__) | {n for n, v in vars(Host).items() if callable(v) and not n.startswith("_")}
    assert set(HOST_MEMBERS) == declared
    assert not is_host(torch.nn.Linear(2, 2))
