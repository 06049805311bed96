"""Every preset named after a released model takes the released state dict with no key left over
(key sets built on the meta device from the released module structures)."""

from pathlib import Path

import pytest

import vitpos
from vitpos.models.factory import get_config
from vitpos.registry import ARCHITECTURES
from vitpos.weights import detect_layout, guess_preset
from vitpos.weights.files import WeightsFile
from vitpos.weights.load import convert_for

from . import layouts

META = layouts.Filler(meta=True)
DEIT = {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}
IRPE = {
    # preset: (size, targets, Cream bucket count per table with the class bucket, cross)
    "deit_tiny_patch16_224_ctx_product_50_shared_k": ("tiny", "k", 50, False),
    "deit_small_patch16_224_ctx_euc_20_shared_k": ("small", "k", 82, False),
    "deit_small_patch16_224_ctx_quant_51_shared_k": ("small", "k", 134, False),
    "deit_small_patch16_224_ctx_cross_56_shared_k": ("small", "k", 82, True),
    "deit_small_patch16_224_ctx_product_50_shared_k": ("small", "k", 50, False),
    "deit_small_patch16_224_ctx_product_50_shared_qk": ("small", "qk", 50, False),
    "deit_small_patch16_224_ctx_product_50_shared_qkv": ("small", "qkv", 50, False),
    "deit_base_patch16_224_ctx_product_50_shared_k": ("base", "k", 50, False),
    "deit_base_patch16_224_ctx_product_50_shared_qkv": ("base", "qkv", 50, False),
}


def released_state(name: str) -> dict:
    if name.startswith("deit_") and "_ctx_" in name:
        size, on, buckets, cross = IRPE[name]
        dim, heads = DEIT[size]
        sd = layouts.timm_vit(META, dim, 12, 16, 14, 1000)
        return layouts.irpe_tables(sd, META, 12, heads, dim // heads, on, buckets, cross=cross)
    if name.startswith("deit_"):
        dim, _ = DEIT[name.split("_")[1]]
        sd = layouts.timm_vit(META, dim, 12, 16, 14, 1000)
        return layouts.lape_norms(sd, META, 12, dim) if name.endswith("_lape") else sd
    if name.startswith("swin_tiny"):
        style = "timm" if name.endswith("timm") else "microsoft"
        return layouts.swin(META, (96, 192, 384, 768), (2, 2, 6, 2), (3, 6, 12, 24), 7, 4, 224, 1000, style=style)
    depths = (2, 2, 2, 2) if name == "pvt_tiny" else (3, 4, 6, 3)
    return layouts.pvt(META, (64, 128, 320, 512), depths, (1, 2, 5, 8), (8, 8, 4, 4), (8, 4, 2, 1), 4, 224, 1000)


RELEASED = [
    *IRPE,
    "deit_tiny_patch16_224",
    "deit_small_patch16_224",
    "deit_base_patch16_224",
    "deit_small_patch16_224_lape",
    "swin_tiny",
    "swin_tiny@timm",
    "pvt_tiny",
    "pvt_small",
]


@pytest.mark.parametrize("name", RELEASED)
def test_released_key_set_maps_completely(name):
    preset = name.split("@")[0]
    state = released_state(name)
    layout = detect_layout(state, name)
    cfg = layout.released_config(get_config(preset))
    with __import__("torch").device("meta"):
        model = ARCHITECTURES.get(cfg.arch)(cfg)
    merged, result = convert_for(model, state, layout, name)  # raises on any key left over, missing or mis-shaped
    assert result.dropped == [] and set(merged) == set(model.state_dict())


@pytest.mark.parametrize(
    "name, found",
    [
        ("deit_small_patch16_224_ctx_product_50_shared_qkv", None),
        ("deit_small_patch16_224_ctx_cross_56_shared_k", None),
        ("swin_tiny@timm", "swin_tiny"),
        ("pvt_small", None),
        ("deit_small_patch16_224_lape", "deit_small_patch16_224"),  # the same model once chained
    ],
)
def test_the_preset_is_found_from_the_checkpoint_alone(name, found):
    state = released_state(name)
    assert guess_preset(WeightsFile(Path(name), state), detect_layout(state, name)) == (found or name)


@pytest.mark.parametrize("pe_norm", [True, False])
def test_a_lape_1d_sin_checkpoint_finds_its_preset(pe_norm):
    # --pe 1D_sin stores pos_embed as (197, 192); the first releases' args name the unchained join
    state = released_state("deit_tiny_patch16_224_lape" if pe_norm else "deit_tiny_patch16_224")
    state["pos_embed"] = state["pos_embed"][0]
    args = {"pe": "1D_sin", "pe_joining": "LaPE" if pe_norm else "default"}
    file = WeightsFile(Path("sin.pth"), state, args=args)
    assert guess_preset(file, detect_layout(state, "sin.pth")) == "deit_tiny_patch16_224"


def test_preset_parameter_counts_equal_the_released_models():
    # the released counts, from the key sets above: every released tensor has one place
    for name in ("deit_small_patch16_224_ctx_product_50_shared_k", "swin_tiny", "pvt_tiny"):
        released = sum(
            t.numel()
            for k, t in released_state(name).items()
            if not k.endswith(("relative_position_index", "attn_mask"))
        )
        with __import__("torch").device("meta"):
            ours = sum(p.numel() for p in vitpos.create_model(name).parameters())
        assert ours == released, name


@pytest.mark.parametrize(
    "name", ["deit_small_patch16_224_ctx_product_50_shared_qk", "deit_small_patch16_224_ctx_product_50_shared_qkv"]
)
def test_a_query_table_with_real_values_does_not_break_preset_guessing(name):
    # the other presets' bucket counts (euc_20: 82, quant_51: 134) do not fit the 50-row tables: a shape
    # error for those candidates, not an IndexError from reordering the query table's rows
    size, on, buckets, cross = IRPE[name]
    dim, heads = DEIT[size]
    state = layouts.timm_vit(META, dim, 12, 16, 14, 1000)
    layouts.irpe_tables(state, layouts.Filler(seed=5), 12, heads, dim // heads, on, buckets, cross=cross)
    assert guess_preset(WeightsFile(Path(name), state), detect_layout(state, name)) == name
