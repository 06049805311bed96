"""RandAugment's ops against their definition: the Pillow calls timm's RandAugment makes, on a small image."""

import kornia
import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps

from vitpos.data.randaugment import OPS, RandAugment, apply_op
from vitpos.data.randaugment_batch import NAMES, apply_layer_, equalize_tables
from vitpos.data.randaugment_ops import to_levels_

FILL = (0.5, 0.25, 0.75)
FILL_RGB = tuple(round(255 * f) for f in FILL)


def _photo(h=20, w=24, seed=0):
    """A smooth random colour image (so resampling is well defined) as uint8 (H, W, 3)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, 5, 6, generator=g)
    smooth = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False)
    return (smooth.clamp(0, 1)[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()


def _pillow(name, img, level, sign, increasing):
    """timm's op ``name`` at magnitude ``level`` (0..10), written with the Pillow calls it makes."""
    f = level / 10
    enhance = max(0.1, 1.0 + sign * f * 0.9) if increasing else f * 1.8 + 0.1
    affine = {"resample": Image.Resampling.BILINEAR, "fillcolor": FILL_RGB}
    w, h = img.size
    if name == "AutoContrast":
        return ImageOps.autocontrast(img)
    if name == "Equalize":
        return ImageOps.equalize(img)
    if name == "Invert":
        return ImageOps.invert(img)
    if name == "Posterize":
        bits = 4 - int(f * 4) if increasing else int(f * 4) + 4
        return img if bits >= 8 else ImageOps.posterize(img, bits)
    if name == "Solarize":
        return ImageOps.solarize(img, 256 - int(f * 256) if increasing else int(f * 256))
    if name == "SolarizeAdd":
        add = int(f * 110)
        return img.point([min(255, i + add) if i < 128 else i for i in range(256)] * 3)
    if name in ("Color", "Contrast", "Brightness", "Sharpness"):
        return getattr(ImageEnhance, name)(img).enhance(enhance)
    if name == "Rotate":
        return img.rotate(sign * f * 30, **affine)
    data = {
        "ShearX": (1, sign * f * 0.3, 0, 0, 1, 0),
        "ShearY": (1, 0, 0, sign * f * 0.3, 1, 0),
        "TranslateXRel": (1, 0, sign * f * 0.45 * w, 0, 1, 0),
        "TranslateYRel": (1, 0, 0, 0, 1, sign * f * 0.45 * h),
    }[name]
    return img.transform(img.size, Image.Transform.AFFINE, data, **affine)


def _interior(name, h, w, level, sign):
    """Pixels whose source lies at least 2 px inside the image (where no fill colour blends in)."""
    if name not in ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"):
        return torch.ones(h, w, dtype=torch.bool)
    from vitpos.data.randaugment import affine_matrix

    amount = {"Rotate": 30, "ShearX": 0.3, "ShearY": 0.3, "TranslateXRel": 0.45, "TranslateYRel": 0.45}[name]
    m = affine_matrix(name, torch.tensor([sign * level / 10 * amount]), h, w)[0]
    ys, xs = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    sx = m[0, 0] * xs + m[0, 1] * ys + m[0, 2] - 0.5
    sy = m[1, 0] * xs + m[1, 1] * ys + m[1, 2] - 0.5
    return (sx >= 2) & (sx <= w - 3) & (sy >= 2) & (sy <= h - 3)


@pytest.mark.parametrize("increasing", [True, False])
@pytest.mark.parametrize("name", list(OPS))
def test_each_op_at_a_fixed_magnitude_equals_pillows(name, increasing):
    pixels = _photo()
    ra = RandAugment(fill=FILL, increasing=increasing, interpolation="bilinear")
    x = torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255
    for level, sign in ((9.0, 1.0), (6.0, -1.0)):
        got = apply_op(name, x, torch.tensor([level]), torch.tensor([sign]), ra)[0].permute(1, 2, 0)
        want = torch.from_numpy(np.array(_pillow(name, Image.fromarray(pixels), level, sign, increasing))).float()
        inside = _interior(name, *pixels.shape[:2], level, sign)
        assert inside.float().mean() > 0.3  # the comparison covers a good part of the image
        diff = (got * 255 - want).abs()[inside]
        # Pillow truncates intermediate values to whole grey levels; the ops here stay in float
        assert diff.max() <= 1.5, (name, level, float(diff.max()))
        if name != "AutoContrast":  # the only op that may leave an image unchanged (one spanning 0..255)
            assert (got - x[0].permute(1, 2, 0)).abs().max() > 0


def test_randaugment_applies_ops_per_image_and_replays_under_a_seed():
    x = torch.from_numpy(_photo(16, 16)).permute(2, 0, 1)[None].float().div(255).repeat(64, 1, 1, 1)
    ra = RandAugment.from_spec("rand-m9-mstd0.5-inc1")
    assert (ra.magnitude, ra.magnitude_std, ra.increasing, ra.layers) == (9.0, 0.5, True, 2)
    torch.manual_seed(3)
    a = ra(x)
    torch.manual_seed(3)
    b = ra(x)
    assert torch.equal(a, b) and a.min() >= 0 and a.max() <= 1
    changed = (a - x).abs().flatten(1).amax(1) > 0
    # each image is left alone only when both layers skip (odds 1/4), so about 3/4 change
    assert 0.5 < changed.float().mean() < 0.95


@pytest.mark.parametrize("spec", ["rand-x9", "auto-m9", "rand-mnine"])
def test_bad_spec_says_how_to_write_one(spec):
    with pytest.raises(ValueError, match=r"rand-m<magnitude>.*rand-m9-mstd0.5-inc1"):
        RandAugment.from_spec(spec)


def test_every_op_runs_on_grey_images():
    x = torch.from_numpy(_photo(12, 12)).permute(2, 0, 1)[None, :1].float().div(255).repeat(3, 1, 1, 1)
    ra = RandAugment(fill=(0.5,))
    for name in OPS:
        out = apply_op(name, x, torch.full((3,), 9.0), torch.tensor([1.0, -1.0, 1.0]), ra)
        assert out.shape == x.shape and out.min() >= 0 and out.max() <= 1, name


def _reference(x, op, level, sign, ra):
    """Each image alone through each layer's op definition (floats), rounded to grey levels between ops."""
    out = x.clone()
    for i in range(x.shape[0]):
        for layer in range(op.shape[0]):
            k = int(op[layer, i])
            if k >= 0:
                one = apply_op(
                    NAMES[k], out[i : i + 1].float() / 255, level[layer, i : i + 1], sign[layer, i : i + 1], ra
                )
                out[i] = to_levels_(one)[0]
    return out


@pytest.mark.parametrize("increasing", [True, False])
def test_batched_layers_equal_each_image_alone(increasing):
    g = torch.Generator().manual_seed(int(increasing))
    images = [_photo(18, 22, seed) for seed in range(4)]
    x = torch.from_numpy(np.stack(images * 15)).permute(0, 3, 1, 2).contiguous()  # 60 images
    b = x.shape[0]
    op = torch.stack([torch.randperm(b, generator=g) % len(NAMES), torch.randint(-1, len(NAMES), (b,), generator=g)])
    level = torch.rand(2, b, generator=g) * 10
    sign = torch.where(torch.rand(2, b, generator=g) < 0.5, -1.0, 1.0)
    ra = RandAugment(fill=FILL, increasing=increasing)
    got = x.clone()
    for layer in range(2):
        apply_layer_(got, op[layer], level[layer], sign[layer], ra)
    assert torch.equal(got, _reference(x, op, level, sign, ra))
    assert (got != x).flatten(1).any(1).float().mean() > 0.8


def test_equalize_tables_equal_kornias_equalize():
    x = torch.from_numpy(np.stack([_photo(20, 24, s) for s in range(3)])).permute(0, 3, 1, 2).contiguous()
    x[1, 2] = 77  # a flat channel: left as it is
    x[2, 0, :10] = 255  # a channel half at one level
    tables = equalize_tables(x)
    got = tables.gather(2, x.flatten(2).long()).view_as(x)
    want = to_levels_(kornia.enhance.equalize(x.float() / 255))
    assert torch.equal(got, want) and torch.equal(got[1, 2], x[1, 2])


def test_randaugment_keeps_uint8_and_rounds_floats():
    x = torch.from_numpy(_photo(16, 16)).permute(2, 0, 1)[None].repeat(8, 1, 1, 1)
    ra = RandAugment.from_spec("rand-m9-mstd0.5-inc1")
    torch.manual_seed(1)
    a = ra(x)
    torch.manual_seed(1)
    b = ra(x.float() / 255)
    assert a.dtype == torch.uint8 and b.dtype == torch.float32 and torch.equal(a.float() / 255, b)
