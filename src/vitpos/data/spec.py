"""Data specs: one string names a data set and its options, e.g. ``synthetic:direction:train=500``."""

from __future__ import annotations

from collections.abc import Callable

from ..spec import SlotSpec, SpecError
from .cifar import load_cifar_splits
from .dataset import DataSplits
from .digits import load_digits_splits
from .folders import load_folder_splits
from .synthetic import TASKS, SyntheticTask

__all__ = ["open_data", "DATA_FORMS"]

DATA_FORMS = {
    "synthetic": "synthetic:TASK[:img=32|HxW][:square=PATCH][:train=5000][:val=1000][:test=1000][:seed=0][:free]",
    "folder": "folder:PATH",
    "cifar10": "cifar10:PATH",
    "cifar100": "cifar100:PATH",
    "digits": "digits[:seed=0]",
}
"""Every accepted form; TASK is one of the synthetic tasks."""


def _image_size(text: str) -> int | tuple[int, int]:
    """``32`` or ``32x48`` (height x width)."""
    h, x, w = text.partition("x")
    return (int(h), int(w)) if x else int(h)


_SYNTHETIC_OPTIONS: dict[str, Callable[[str], object]] = {
    "img": _image_size,
    "square": int,
    "train": int,
    "val": int,
    "test": int,
    "seed": int,
}


def _forms() -> str:
    return "; ".join(DATA_FORMS.values()) + f" (TASK: {', '.join(TASKS)})"


def open_data(spec: str, *, patch_size: int | None = None) -> DataSplits:
    """Open the data set named by ``spec``.

    ``patch_size`` is the model's: synthetic squares are one patch wide unless ``square=`` says
    otherwise.
    """
    kind, _, rest = spec.partition(":")
    if kind in ("folder", "cifar10", "cifar100"):
        if not rest:
            raise SpecError(f"data spec {spec!r} needs a path: {DATA_FORMS[kind]}")
        return load_folder_splits(rest) if kind == "folder" else load_cifar_splits(kind, rest)
    if kind not in ("synthetic", "digits"):
        raise SpecError(f"unknown data source {kind!r} in {spec!r}; valid forms: {_forms()}")
    parsed = SlotSpec.parse(spec)
    if kind == "digits":
        parsed.check_flags(set())
        return load_digits_splits(**parsed.typed_options({"seed": int}))
    return _synthetic(parsed, patch_size).splits()


def _synthetic(parsed: SlotSpec, patch_size: int | None) -> SyntheticTask:
    parsed.check_no_placement()
    parsed.check_flags({*TASKS, "free"})
    tasks = [f for f in parsed.flags if f in TASKS]
    if len(tasks) != 1:
        raise SpecError(f"'{parsed}' must name exactly one synthetic task: {', '.join(TASKS)}")
    opts = parsed.typed_options(_SYNTHETIC_OPTIONS)
    return SyntheticTask(
        task=tasks[0],
        img_size=opts.pop("img", 32),
        square_size=opts.pop("square", patch_size or 4),
        aligned="free" not in parsed.flags,
        **opts,
    )
