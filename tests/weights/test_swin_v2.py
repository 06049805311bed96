"""Swin V2 checkpoints (Microsoft's and timm's layouts) give the released forward pass in vitpos's Swin V2.

The files are scaled-down ``swinv2_tiny_window8_256`` (four stages, two blocks each, narrow), with
the release's names and shape pattern; :mod:`.swin_v2_reference` is the forward pass they were
written for.
"""

from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.weights.build import guess_model
from vitpos.weights.files import WeightsFile
from vitpos.weights.load import layout_of

from . import layouts
from .conftest import assert_close, load_float64, save_pth
from .swin_v2_reference import log_coords, swinv2_forward, swinv2_state

DIMS, DEPTHS, HEADS = (8, 16, 24, 32), (2, 2, 2, 2), (1, 2, 3, 4)
SMALL = dict(
    embed_dims=DIMS, depths=DEPTHS, num_heads=HEADS, window_size=4, patch_size=2, img_size=64, num_classes=5
)  # stage grids 32, 16, 8, 4 at 64 px: windows of 4, the last stage one window
NAME = "swinv2_tiny_window8_256"


def state(style: str, seed: int = 61, window: int = 4, img: int = 64, pretrained: int | None = None) -> dict:
    return swinv2_state(
        layouts.Filler(seed), DIMS, DEPTHS, HEADS, window=window, patch=2, img=(img, img), classes=5, style=style,
        pretrained=pretrained,
    )  # fmt: skip


def images(h: int, w: int, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, h, w, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


@pytest.mark.parametrize("style", ["microsoft", "timm"])
@pytest.mark.parametrize("size", [(64, 64), (32, 32), (64, 128)], ids=["trained", "smaller", "non-square"])
def test_a_swinv2_file_loads_strictly_and_equals_the_released_forward(tmp_path, style, size):
    # 32 px: the last two stages (4x4, 2x2 grids) shrink their windows to the grid; 64x128: 8x16 grids
    sd = state(style)
    model = load_float64(NAME, save_pth(sd, tmp_path / f"{style}.pth"), **SMALL)
    x = images(*size)
    assert_close(model(x), swinv2_forward(sd, x, DEPTHS, HEADS, window=4, style=style))


def test_the_layouts_are_detected_and_the_names_match_the_release_exactly(tmp_path):
    model = vitpos.create_model(NAME, **SMALL)
    for style, layout in (("microsoft", "swinv2"), ("timm", "timm-swinv2")):
        result = vitpos.load_weights(model, save_pth(state(style), tmp_path / f"{style}.pth"))
        assert result.layout == layout and result.dropped == []
    block = model.stages[1].blocks[0]
    assert block.attn.logit_scale.shape == (2, 1, 1) and block.attn.qkv.bias is None
    assert block.attn.relative.mlp[0].weight.shape == (512, 2) and block.attn.relative.mlp[2].weight.shape == (2, 512)


FULL_SIZES = {
    "swinv2_tiny_window8_256": ((96, 192, 384, 768), (2, 2, 6, 2), (3, 6, 12, 24), 28.3),
    "swinv2_small_window16_256": ((96, 192, 384, 768), (2, 2, 18, 2), (3, 6, 12, 24), 49.7),
    "swinv2_base_window8_256": ((128, 256, 512, 1024), (2, 2, 18, 2), (4, 8, 16, 32), 87.9),
}


def timm_names(key: str) -> str:
    """A timm swinv2 key as vitpos names it."""
    for old, new in (("patch_embed.", "downsamples.0."), ("attn.cpb_mlp", "attn.relative.mlp"), ("head.fc.", "head.")):
        key = key.replace(old, new)
    stage = key.split(".")[1] if key.startswith("layers.") else ""
    key = key.replace(f"layers.{stage}.downsample", f"downsamples.{stage}")
    return key.replace("layers.", "stages.")


@pytest.mark.parametrize("name", list(FULL_SIZES))
def test_the_full_size_layouts_have_exactly_the_presets_parameters(name):
    dims, depths, heads, published = FULL_SIZES[name]
    window = int(name.split("window")[1].split("_")[0])
    sd = swinv2_state(layouts.Filler(meta=True), dims, depths, heads, window, 4, (256, 256), 1000, "timm")
    with torch.device("meta"):
        model = vitpos.create_model(name)
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {
        timm_names(k): tuple(v.shape) for k, v in sd.items()
    }
    count = sum(p.numel() for p in model.parameters())
    assert count == sum(v.numel() for v in sd.values()) and round(count / 1e6, 1) == published  # timm's table


def test_a_file_for_another_window_is_refused_and_its_advice_loads_exactly(tmp_path):
    sd = state("microsoft", window=2)  # windows of 2: the file's coordinate tables say so
    path = save_pth(sd, tmp_path / "w2.pth")
    with pytest.raises(
        vitpos.CheckpointError, match=r"a 2-token window, not the model's \(window 4.*build it with window_size=2$"
    ):
        vitpos.create_model(NAME, checkpoint=path, **SMALL)
    model = load_float64(NAME, path, **{**SMALL, "window_size": 2})
    x = images(64, 64)
    assert_close(model(x), swinv2_forward(sd, x, DEPTHS, HEADS, window=2))


def test_offsets_normalised_by_a_pretrained_window_are_refused_and_the_advice_loads_exactly(tmp_path):
    sd = state("microsoft", pretrained=3)  # a window-4 model fine-tuned from window 3
    assert torch.allclose(
        sd["layers.0.blocks.0.attn.relative_coords_table"].double().reshape(-1, 2), log_coords((4, 4), 3)
    )
    path = save_pth(sd, tmp_path / "w3to4.pth")
    with pytest.raises(
        vitpos.CheckpointError,
        match=r"normalised by window 3, not the model's .*build it with relative='cpb:pretrained=3'$",
    ):
        vitpos.create_model(NAME, checkpoint=path, **SMALL)
    model = load_float64(NAME, path, **SMALL, relative="cpb:pretrained=3")
    x = images(64, 64)
    assert_close(model(x), swinv2_forward(sd, x, DEPTHS, HEADS, window=4, pretrained=3))


def test_a_swinv2_file_is_refused_by_a_swin_v1_model_with_what_to_build(tmp_path):
    path = save_pth(state("timm"), tmp_path / "v2.pth")
    with pytest.raises(vitpos.CheckpointError, match=r"Swin V2 checkpoint: load it into a Swin V2 model"):
        vitpos.create_model("swin_tiny", checkpoint=path, **SMALL)


def test_keep_grid_builds_the_window_the_files_coordinate_tables_show(tmp_path):
    sd = state("microsoft", window=8)
    model = load_float64(NAME, save_pth(sd, tmp_path / "w8.pth"), keep_grid=True, **SMALL)
    assert model.cfg.window_size == 8
    x = images(64, 64)
    assert_close(model(x), swinv2_forward(sd, x, DEPTHS, HEADS, window=8))


@pytest.mark.parametrize("window", [8, 16])
def test_with_no_model_named_a_microsoft_file_finds_its_window_and_a_timm_file_asks_for_the_name(window):
    dims, depths, heads, _ = FULL_SIZES[NAME]
    shapes = dict(dims=dims, depths=depths, heads=heads, window=window, patch=4, img=(256, 256), classes=1000)
    microsoft = WeightsFile(Path("ms.pth"), swinv2_state(layouts.Filler(meta=True), **shapes))  # coordinates real
    assert guess_model(microsoft, layout_of(microsoft)) == (f"swinv2_tiny_window{window}_256", {})
    timm = WeightsFile(Path("timm.pth"), swinv2_state(layouts.Filler(meta=True), **shapes, style="timm"))
    with pytest.raises(vitpos.CheckpointError, match=r"several presets fit it \(swinv2_tiny_window16_256, swinv2_tin"):
        guess_model(timm, layout_of(timm))


def test_per_stage_pretrained_windows_are_refused_without_advice(tmp_path):
    sd = state("microsoft", pretrained=3)
    for block in (0, 1):  # the last stage fine-tuned from window 2, the others from 3 (as the 22K releases)
        sd[f"layers.3.blocks.{block}.attn.relative_coords_table"] = log_coords((4, 4), 2).float().reshape(1, 7, 7, 2)
    with pytest.raises(vitpos.CheckpointError, match=r"normalised by window 2, 3, which no one window_size and"):
        vitpos.create_model(NAME, checkpoint=save_pth(sd, tmp_path / "stages.pth"), **SMALL)


def test_a_model_built_for_smaller_images_takes_the_file_and_shrinks_its_windows_as_the_release(tmp_path):
    sd = state("microsoft")  # trained at 64 px: every stage has 4x4 windows
    model = load_float64(NAME, save_pth(sd, tmp_path / "w4.pth"), **{**SMALL, "img_size": 32})  # grids 16 ... 2
    x = images(32, 32)
    assert_close(model(x), swinv2_forward(sd, x, DEPTHS, HEADS, window=4))
