"""``synthetic:detect``: boxes cover exactly their painted squares on images of varied sizes; splits are a
pure function of the spec."""

import pytest
import torch

from vitpos.data.catalog import open_data
from vitpos.data.synthetic_detect import DETECT_COLOURS, SyntheticDetection
from vitpos.tasks.detection import unpad_objects


def everything(split):
    """The whole split as one padded batch."""
    return split[torch.arange(len(split))]


@pytest.mark.parametrize("size, vary", [((32, 32), 0.25), ((48, 96), 0.5), ((32, 40), 0.0)])
def test_boxes_are_the_painted_squares_in_their_class_colour(size, vary):
    split = SyntheticDetection(img_size=size, vary=vary, test=30).render("test")
    images, padded = everything(split)
    colours = torch.tensor(list(DETECT_COLOURS.values()), dtype=torch.uint8)
    counts = []
    sizes = padded.valid_sizes.tolist()
    assert sizes == padded.sizes.tolist() and images.shape[-2:] == tuple(max(s[i] for s in sizes) for i in (0, 1))
    low = [int(-(-(1 - vary) * side // 1)) for side in size]
    assert all(low[0] <= h <= size[0] and low[1] <= w <= size[1] for h, w in sizes)
    distinct = len({tuple(s) for s in sizes})
    assert distinct == 1 if vary == 0 else distinct > 5
    for image, objects, (h, w) in zip(images, unpad_objects(padded.targets), sizes, strict=True):
        painted = torch.zeros(image.shape[-2:], dtype=torch.bool)
        counts.append(len(objects.labels))
        for label, (cx, cy, bw, bh) in zip(objects.labels, objects.boxes.tolist(), strict=True):
            x0, y0, x1, y1 = (  # normalised by the image's own size
                round((cx - bw / 2) * w),
                round((cy - bh / 2) * h),
                round((cx + bw / 2) * w),
                round((cy + bh / 2) * h),
            )
            assert x1 - x0 == y1 - y0 and 4 <= x1 - x0 <= 10  # squares of the default sizes
            assert x1 <= w and y1 <= h  # inside the image, not in its padding
            assert (image[:, y0:y1, x0:x1] == colours[label][:, None, None]).all()
            painted[y0:y1, x0:x1] = True
        assert (image[:, ~painted] == 0).all()  # nothing else is painted: squares do not overlap
    assert min(counts) >= 1 and max(counts) <= 3 and len(set(counts)) > 1


def test_spec_options_round_trip_and_splits_are_reproducible():
    spec = "synthetic:detect:img=48x80:vary=0.5:objects=2:min=5:max=8:train=20:val=5:test=6:seed=3"
    data = open_data(spec)
    assert data.info.spec == spec and data.image_size == (48, 80)
    images, padded = everything(data.train)
    again = everything(open_data(data.info.spec).train)
    assert torch.equal(images, again[0]) and torch.equal(padded.targets, again[1].targets)
    assert padded.targets.shape == (20, 2, 5) and len(data.test) == 6
    assert not torch.equal(everything(data.val)[1].sizes, everything(data.test)[1].sizes[:5])


def test_other_sizes_are_drawn_anew():
    split = SyntheticDetection(test=10).render("test")
    larger = split.at_size((96, 128)).padded_to(32)
    images, padded = everything(larger)
    assert len(larger) == 10 and images.shape[-2:] == (96, 128) and larger.stride == 32
    assert ((padded.sizes[:, 0] >= 72) & (padded.sizes[:, 1] >= 96)).all()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("synthetic:detect:min=10:max=5", "min=10 is larger than max=5"),
        ("synthetic:detect:img=16", "too small for squares of up to 10"),
        ("synthetic:detect:img=32:vary=0.5", "its smallest images are"),
        ("synthetic:detect:vary=1", "vary"),
        ("synthetic:detect:square=4", "unknown option 'square'"),
        ("synthetic:detect:direction", "unknown flag"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        open_data(spec)
