"""The data catalogue: a data spec names a data set and its options, e.g. ``synthetic:direction:train=500``."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import quote
from ..spec import SlotSpec, SpecError
from .cifar import load_cifar_splits
from .coco import load_coco_splits
from .dataset import DataSplits
from .digits import load_digits_splits
from .folders import load_folder_splits
from .masks import load_mask_splits
from .shards import load_shard_splits
from .synthetic import TASKS, SyntheticTask
from .synthetic_detect import SyntheticDetection
from .synthetic_segment import SEGMENT_TASKS, SyntheticSegmentation

__all__ = ["open_data", "anchored_spec", "DATA_FORMS"]

DATA_FORMS = {
    "synthetic": (
        "synthetic:TASK[:img=32|HxW][:square=PATCH][:train=5000][:val=1000][:test=1000][:seed=0][:free]"
        "[:vary=0.25 (segmentation)]"
    ),
    "detect": (
        "synthetic:detect[:img=32|HxW][:vary=0.25][:objects=3][:min=4][:max=10][:train=800][:val=100][:test=200]"
        "[:seed=0]"
    ),
    "folder": "folder:PATH",
    "wds": (
        "wds:PATTERN[:val=PATTERN][:test=PATTERN][:resample] (WebDataset tar shards, e.g. "
        "wds:/data/train-{000000..000099}.tar)"
    ),
    "coco": "coco:PATH",
    "masks": "masks:PATH[:classes=N][:reduce_zero]",
    "cifar10": "cifar10:PATH",
    "cifar100": "cifar100:PATH",
    "digits": "digits[:seed=0]",
}
"""Every accepted form; TASK is one of the synthetic tasks (classification, regression or segmentation)."""


def _image_size(text: str) -> int | tuple[int, int]:
    """``32`` or ``32x48`` (height x width)."""
    h, x, w = text.partition("x")
    return (int(h), int(w)) if x else int(h)


_SYNTHETIC_OPTIONS: dict[str, Callable[[str], object]] = {
    "img": _image_size,
    "vary": float,
    "square": int,
    "train": int,
    "val": int,
    "test": int,
    "seed": int,
}
_DETECT_OPTIONS: dict[str, Callable[[str], object]] = {
    "img": _image_size,
    "vary": float,
    "objects": int,
    "min": int,
    "max": int,
    "train": int,
    "val": int,
    "test": int,
    "seed": int,
}


_PATH_KINDS = ("folder", "cifar10", "cifar100", "coco")
"""The data sources whose spec is ``KIND:PATH`` (the whole rest is the path)."""


def anchored_spec(spec: str) -> str:
    """``spec`` with every path in it made absolute against this process's folder (``~`` expanded), so that a run
    records the files it read, whichever folder later reads the record; other specs are returned as they are."""
    kind, _, rest = spec.partition(":")
    if not rest or "://" in rest:
        return spec
    if kind in _PATH_KINDS:
        return f"{kind}:{_absolute(rest)}"
    if kind not in ("masks", "wds"):
        return spec
    first, *options = rest.split(":")  # a path holds no ':' in these forms
    named = [f"{key}={_absolute(value)}" if key in ("val", "test") and value else f"{key}{eq}{value}"
             for key, eq, value in (option.partition("=") for option in options)]  # fmt: skip
    return ":".join([kind, _absolute(first) if first else first, *named])


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _forms() -> str:
    return "; ".join(DATA_FORMS.values()) + f" (TASK: {', '.join(TASKS + SEGMENT_TASKS)})"


def open_data(spec: str, *, patch_size: int | None = None) -> DataSplits:
    """Open the data set named by ``spec``.

    ``patch_size`` is the model's: synthetic squares are one patch wide unless ``square=`` says
    otherwise.
    """
    if not isinstance(spec, str):
        raise SpecError(f"open_data: spec must be a data spec string such as 'synthetic:direction', got {quote(spec)}")
    kind, _, rest = spec.partition(":")
    if kind in ("folder", "cifar10", "cifar100", "coco"):
        if not rest:
            raise SpecError(f"data spec {spec!r} needs a path: {DATA_FORMS[kind]}")
        if kind == "coco":
            return load_coco_splits(rest)
        return load_folder_splits(rest) if kind == "folder" else load_cifar_splits(kind, rest)
    if kind == "masks":
        return _masks(spec, rest)
    if kind == "wds":
        return load_shard_splits(spec)
    if kind not in ("synthetic", "digits"):
        raise SpecError(f"unknown data source {kind!r} in {spec!r}; valid forms: {_forms()}")
    parsed = SlotSpec.parse(spec)
    if kind == "digits":
        parsed.check_flags(set())
        return load_digits_splits(**parsed.typed_options({"seed": int}))
    if "detect" in parsed.flags:
        return _synthetic_detect(parsed).splits()
    return _synthetic(parsed, patch_size).splits()


def _synthetic_detect(parsed: SlotSpec) -> SyntheticDetection:
    parsed.check_no_placement()
    parsed.check_flags({"detect"})
    opts = parsed.typed_options(_DETECT_OPTIONS)
    names = {"img": "img_size", "min": "min_size", "max": "max_size"}
    return SyntheticDetection(**{names.get(k, k): v for k, v in opts.items()})


def _synthetic(parsed: SlotSpec, patch_size: int | None) -> SyntheticTask:
    parsed.check_no_placement()
    every = TASKS + SEGMENT_TASKS
    parsed.check_flags({*every, "free"})
    tasks = [f for f in parsed.flags if f in every]
    if len(tasks) != 1:
        raise SpecError(f"'{parsed}' must name exactly one synthetic task: {', '.join(every)}")
    opts = parsed.typed_options(_SYNTHETIC_OPTIONS)
    kind = SyntheticSegmentation if tasks[0] in SEGMENT_TASKS else SyntheticTask
    if "vary" in opts and kind is SyntheticTask:
        raise SpecError(f"'{parsed}': vary= sets the image sizes of segmentation tasks; {tasks[0]} draws one size")
    return kind(
        task=tasks[0],
        img_size=opts.pop("img", 32),
        square_size=opts.pop("square", patch_size or 4),
        aligned="free" not in parsed.flags,
        **opts,
    )


def _masks(spec: str, rest: str) -> DataSplits:
    """``masks:PATH[:classes=N][:reduce_zero]``: the path, then options (a path holds no ':')."""
    path, *options = rest.split(":")
    if not path:
        raise SpecError(f"data spec {spec!r} needs a path: {DATA_FORMS['masks']}")
    parsed = SlotSpec.parse(":".join(["masks", *options]))
    parsed.check_flags({"reduce_zero"})
    return load_mask_splits(path, **parsed.typed_options({"classes": int}), reduce_zero="reduce_zero" in parsed.flags)
