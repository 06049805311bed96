"""Padded batches: an image padded in a batch gives, on its valid cells, what it gives alone.

For every slot value of the catalogue (``tests/analysis/families.py``) on every host (ViT with
and without a class token, PVT, Swin, DETR's encoder and decoder), in float64 with random
non-zero weights; on every attention path; under bf16 autocast and torch.compile.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import vitpos
from vitpos.attention import PATHS, attention
from vitpos.errors import VitposError
from vitpos.padding import Padding

from ..analysis.families import FAMILIES, tiny_model, tiny_pyramid


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models run faster on one thread where cores are shared."""


def randomise(model: torch.nn.Module) -> torch.nn.Module:
    """float64, eval mode, every parameter moved off its initial value (relative tables start at zero)."""
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p), alpha=0.1)
    return model


def padded_batch(images: list[torch.Tensor], size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (1, C, h, w) at the top left of a zero batch of ``size``, and DETR's mask (True at padding)."""
    batch = images[0].new_zeros(len(images), images[0].shape[1], *size)
    mask = torch.ones(len(images), *size, dtype=torch.bool)
    for i, image in enumerate(images):
        h, w = image.shape[-2:]
        batch[i, :, :h, :w] = image[0]
        mask[i, :h, :w] = False
    return batch, mask


def valid_tokens(tokens: torch.Tensor, prefix: int, grid: tuple[int, int], size: tuple[int, int]) -> torch.Tensor:
    """The prefix tokens and the valid cells (row-major) of one image's tokens (P + H*W, C) on ``grid``."""
    cells = tokens[prefix:].unflatten(0, grid)[: size[0], : size[1]].flatten(0, 1)
    return torch.cat([tokens[:prefix], cells])


def assert_maps_match(padded: list[torch.Tensor], alone: list[list[torch.Tensor]]) -> None:
    """Every stage's map of image i in the batch equals image i's own on its valid cells; zero beyond."""
    for stage, batch_map in enumerate(padded):
        for i, own in enumerate(alone):
            h, w = own[stage].shape[-2:]
            torch.testing.assert_close(batch_map[i, :, :h, :w], own[stage][0], msg=f"stage {stage}, image {i}")
            beyond = batch_map[i].clone()
            beyond[:, :h, :w] = 0
            assert not beyond.any(), f"stage {stage}, image {i}: padded cells are not zero"


def check_host(model, images: list[torch.Tensor], size: tuple[int, int]) -> None:
    batch, mask = padded_batch(images, size)
    with torch.no_grad():
        assert_maps_match(model.forward_features(batch, padding_mask=mask), [model.forward_features(x) for x in images])
        tokens = model.forward_tokens(batch, padding_mask=mask)
        grid = model.stage_grids(size)[-1]
        logits = model(batch, padding_mask=mask)
        for i, x in enumerate(images):
            own = model.stage_grids(tuple(x.shape[-2:]))[-1]
            expected = model.forward_tokens(x)[0]
            torch.testing.assert_close(valid_tokens(tokens[i], model.num_prefix_tokens, grid, own), expected)
            torch.testing.assert_close(logits[i], model(x)[0])


def images(*sizes: tuple[int, int]) -> list[torch.Tensor]:
    return [torch.randn(1, 3, h, w, dtype=torch.float64) for h, w in sizes]


@pytest.mark.parametrize("head", ["gap", "cls"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_vit_padded_image_equals_the_image_alone(family, head):
    model = randomise(tiny_model(FAMILIES[family], head=head, img_size=(32, 40)))
    check_host(model, images((24, 32), (40, 48), (40, 24)), (40, 48))  # grids 3x4, 5x6, 5x3 on 5x6


@pytest.mark.parametrize("arch", ["pvt", "swin"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_pyramid_padded_image_equals_the_image_alone(family, arch):
    """PVT reduces the keys of stages 0 and 1 (by 4 and 2) where it has no relative encoding (it takes
    none with a reduction); Swin's 2x2 windows are shifted at every stage, padded or alone."""
    slots = {"absolute": "none", **FAMILIES[family]}
    reduction = {"sr_ratios": (1, 1, 1, 1)} if arch == "pvt" and "relative" in slots else {}
    window = {"window_size": 2} if arch == "swin" else {}
    model = randomise(tiny_pyramid(arch, slots, img_size=(64, 64), **reduction, **window))
    check_host(model, images((48, 48), (64, 48)), (64, 64))  # stage grids 24x24 .. 3x3 and 32x24 .. 4x3


def test_swin_padding_mask_joins_the_shift_and_layout_masks():
    """3x3 windows, shifted every second block: at stage 2 the 8x8 image alone is padded by the layout to
    9x9, in the batch it lies in a 12x12 grid; both masks and the shift's meet in the same windows."""
    model = randomise(tiny_pyramid("swin", {"absolute": "learned", "conditional": "peg"}, window_size=3))
    check_host(model, images((64, 64), (96, 80)), (96, 96))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_detr_encoder_and_decoder_on_padded_memory_equal_the_image_alone(family):
    model = randomise(vitpos.create_model("detr_tiny_sine", enc_depth=2, dec_depth=2, **FAMILIES[family]))
    dim, grid = model.cfg.embed_dim, (5, 6)
    sizes = [(3, 4), (5, 6), (5, 2)]
    alone = [torch.randn(1, h * w, dim, dtype=torch.float64) for h, w in sizes]
    maps = torch.zeros(len(sizes), *grid, dim, dtype=torch.float64)
    for i, (h, w) in enumerate(sizes):
        maps[i, :h, :w] = alone[i][0].unflatten(0, (h, w))
    stride = model.cfg.patch_size
    _, pixel_mask = padded_batch([torch.zeros(1, 1, h * stride, w * stride) for h, w in sizes], (20, 24))
    with torch.no_grad():
        memory = model.encoder(maps.flatten(1, 2), grid, pixel_mask)
        padding = Padding.from_mask(pixel_mask).at(grid)
        out = model.forward_head(memory, grid=grid, padding=padding)
        for i, (tokens, size) in enumerate(zip(alone, sizes, strict=True)):
            own = model.encoder(tokens, size)
            torch.testing.assert_close(valid_tokens(memory[i], 0, grid, size), own[0])
            expected = model.forward_head(own, grid=size)
            for key in ("pred_logits", "pred_boxes"):
                torch.testing.assert_close(out[key][i], expected[key][0], msg=key)
            for layer, aux in enumerate(out.get("aux_outputs", [])):
                torch.testing.assert_close(aux["pred_boxes"][i], expected["aux_outputs"][layer]["pred_boxes"][0])


def test_detr_forward_takes_the_pixel_mask():
    """The whole detector: padded pixels change nothing on the valid region but through the stem's GroupNorm,
    so the image padded with itself (no padding) equals the image alone, and a real mask changes the output."""
    model = vitpos.create_model("detr_tiny_sine_irpe_ctx").eval()
    x = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        none_padded = model(x, padding_mask=torch.zeros(2, 32, 48, dtype=torch.bool))
        plain = model(x)
        torch.testing.assert_close(none_padded["pred_boxes"], plain["pred_boxes"])
        mask = torch.zeros(2, 32, 48, dtype=torch.bool)
        mask[0, :, 32:] = True
        assert not torch.allclose(model(x, padding_mask=mask)["pred_boxes"][0], plain["pred_boxes"][0])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", ["irpe euclidean bias", "irpe product", "irpe cross qkv", "lape swin"])
def test_every_attention_path_masks_padded_keys(family, path):
    """Each path forced in every block (a path that cannot compute a call falls back with a warning)."""
    model = randomise(tiny_model(FAMILIES[family], head="cls", img_size=(32, 40)))
    for block in model.stages[0].blocks:
        block.attn.path = path
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="attention path")
        check_host(model, images((24, 32), (40, 48)), (40, 48))


@pytest.mark.parametrize("path", PATHS)
def test_kernel_key_padding_equals_attention_over_the_valid_keys(path):
    q, k, v = (torch.randn(3, 2, 10, 8, dtype=torch.float64) for _ in range(3))
    valid = [10, 4, 7]
    key_padding = torch.arange(10)[None] >= torch.tensor(valid)[:, None]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="attention path")
        out = attention(q, k, v, scale=0.3, key_padding=key_padding, path=path)
    for i, m in enumerate(valid):
        expected = attention(q[i : i + 1], k[i : i + 1, :, :m], v[i : i + 1, :, :m], scale=0.3, path="explicit")
        torch.testing.assert_close(out[i], expected[0])


def test_gradients_reach_only_the_valid_pixels_and_equal_the_image_alone():
    model = randomise(tiny_model(FAMILIES["peg"], head="gap", img_size=(32, 40)))
    alone, other = images((24, 32), (40, 48))
    batch, mask = padded_batch([alone, other], (40, 48))
    alone.requires_grad_()
    batch.requires_grad_()
    weights = torch.randn(model.num_features, dtype=torch.float64)
    (model.forward_features(alone)[-1][0] * weights[:, None, None]).sum().backward()
    (model.forward_features(batch, padding_mask=mask)[-1][0] * weights[:, None, None]).sum().backward()
    torch.testing.assert_close(batch.grad[0, :, :24, :32], alone.grad[0])
    assert not batch.grad[0, :, 24:].any() and not batch.grad[0, :, :, 32:].any() and not batch.grad[1].any()


def test_bf16_autocast_padded_batch_trains_and_matches_alone():
    model = tiny_model({"absolute": "learned", "conditional": "peg", "relative": "irpe:product:ctx:qkv"}, head="cls")
    xs = [torch.randn(1, 3, 24, 32), torch.randn(1, 3, 32, 40)]
    batch, mask = padded_batch(xs, (32, 40))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tokens = model.forward_tokens(batch, padding_mask=mask)
        own = model.forward_tokens(xs[0])
    assert torch.isfinite(tokens).all()
    torch.testing.assert_close(valid_tokens(tokens[0].float(), 1, (4, 5), (3, 4)), own[0].float(), atol=0.1, rtol=0.05)
    tokens.float().square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_compiled_padded_batch_equals_eager():
    model = tiny_model({"absolute": "sine", "conditional": "peg", "relative": "irpe:product:bias:qk"}, head="cls")
    randomise(model).float()
    xs = [torch.randn(1, 3, 24, 32), torch.randn(1, 3, 32, 40)]
    batch, mask = padded_batch(xs, (32, 40))
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(batch, padding_mask=mask), model(batch, padding_mask=mask))
        torch.testing.assert_close(compiled(batch, padding_mask=mask)[0], model(xs[0])[0], rtol=1e-4, atol=1e-5)


def test_token_padding_is_the_patches_that_are_all_padding():
    mask = torch.ones(2, 32, 48, dtype=torch.bool)
    mask[0, :20, :41] = False  # 20 rows: 2 whole patches of 8 and half a third
    mask[1] = False
    padding = Padding.from_mask(mask).at((4, 6))
    assert padding.sizes() == [(3, 6), (4, 6)]
    expected = torch.ones(4, 6, dtype=torch.bool)
    expected[:3] = False
    assert torch.equal(padding.mask[0], expected) and not padding.mask[1].any()
    assert padding.reduce((2, 4)).sizes() == [(2, 1), (2, 1)]
    assert torch.equal(padding.tokens(1)[:, 0], torch.tensor([False, False]))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.zeros(2, 32, 40), "bool tensor"),
        (torch.zeros(2, 32, 32, dtype=torch.bool), "padding_mask is"),
        (torch.zeros(3, 32, 40, dtype=torch.bool), "one mask per image"),
        (torch.eye(40, dtype=torch.bool)[:32].expand(2, -1, -1), "top-left rectangle"),
        (torch.ones(2, 32, 40, dtype=torch.bool), "needs content"),
    ],
)
def test_bad_padding_masks_say_what_is_wrong(mask, message):
    model = tiny_model({}, img_size=(32, 40))
    with pytest.raises(VitposError, match=message):
        model(torch.randn(2, 3, 32, 40), padding_mask=mask)


def test_a_batch_not_padded_to_the_stride_is_refused():
    model = tiny_model({}, img_size=(32, 40), pad_to_patch=True)
    with pytest.raises(VitposError, match="multiple of the model's stride"):
        model(torch.randn(1, 3, 30, 40), padding_mask=torch.arange(40).expand(1, 30, 40) >= 24)


@pytest.mark.parametrize("family", ["lape swin", "irpe cross qkv", "unshared", "peg circular before block 0"])
def test_parameter_gradients_of_a_padded_batch_sum_those_of_the_images_alone(family):
    """Training mode, the policy's gradient paths: the padded batch's loss on its valid cells has the
    gradient of the images' own losses summed (LaPE's per-image bias included)."""
    model = randomise(tiny_model(FAMILIES[family], head="cls", img_size=(32, 40))).train()
    xs = images((24, 32), (40, 48))
    batch, mask = padded_batch(xs, (40, 48))
    weights = torch.randn(model.num_features, dtype=torch.float64)
    params = [p for p in model.parameters() if p.requires_grad]
    padded = (model.forward_features(batch, padding_mask=mask)[-1] * weights[:, None, None]).sum()
    got = torch.autograd.grad(padded, params, allow_unused=True)
    alone = sum((model.forward_features(x)[-1] * weights[:, None, None]).sum() for x in xs)
    expected = torch.autograd.grad(alone, params, allow_unused=True)
    for g, e in zip(got, expected, strict=True):
        assert (g is None) == (e is None)
        if g is not None:
            torch.testing.assert_close(g, e)
