"""``synthetic:detect``: boxes cover exactly their painted squares, any size, a pure function of the spec."""

import pytest
import torch

from vitpos.data.catalog import open_data
from vitpos.data.synthetic_detect import DETECT_COLOURS, SyntheticDetection
from vitpos.tasks.detection import unpad_objects


@pytest.mark.parametrize("size", [(32, 32), (48, 96)])
def test_boxes_are_the_painted_squares_in_their_class_colour(size):
    split = SyntheticDetection(img_size=size, test=30).render("test")
    h, w = size
    colours = torch.tensor(list(DETECT_COLOURS.values()), dtype=torch.uint8)
    counts = []
    for image, objects in zip(split.images, unpad_objects(split.targets), strict=True):
        painted = torch.zeros(h, w, dtype=torch.bool)
        counts.append(len(objects.labels))
        for label, (cx, cy, bw, bh) in zip(objects.labels, objects.boxes.tolist(), strict=True):
            x0, y0, x1, y1 = (
                round((cx - bw / 2) * w),
                round((cy - bh / 2) * h),
                round((cx + bw / 2) * w),
                round((cy + bh / 2) * h),
            )
            assert x1 - x0 == y1 - y0 and 4 <= x1 - x0 <= 10  # squares of the default sizes
            assert (image[:, y0:y1, x0:x1] == colours[label][:, None, None]).all()
            painted[y0:y1, x0:x1] = True
        assert (image[:, ~painted] == 0).all()  # nothing else is painted: squares do not overlap
    assert min(counts) >= 1 and max(counts) <= 3 and len(set(counts)) > 1


def test_spec_options_round_trip_and_splits_are_reproducible():
    data = open_data("synthetic:detect:img=48x80:objects=2:min=5:max=8:train=20:val=5:test=6:seed=3")
    task = data.train.task
    assert (task.img_size, task.objects, task.min_size, task.max_size, task.seed) == ((48, 80), 2, 5, 8, 3)
    assert data.info.spec == "synthetic:detect:img=48x80:objects=2:min=5:max=8:train=20:val=5:test=6:seed=3"
    assert open_data(data.info.spec).train.targets.equal(data.train.targets)
    assert data.train.targets.shape == (20, 2, 5) and len(data.test) == 6
    assert not data.val.images.equal(data.test.images[:5])


def test_other_sizes_are_drawn_anew():
    split = SyntheticDetection(test=10).render("test")
    larger = split.at_size((96, 128))
    assert larger.images.shape == (10, 3, 96, 128) and larger.task == split.task


@pytest.mark.parametrize(
    "spec, message",
    [
        ("synthetic:detect:min=10:max=5", "min=10 is larger than max=5"),
        ("synthetic:detect:img=16", "too small for squares of up to 10"),
        ("synthetic:detect:square=4", "unknown option 'square'"),
        ("synthetic:detect:direction", "unknown flag"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        open_data(spec)
