"""WebDataset tar shards: ``wds:PATTERN[:val=PATTERN][:test=PATTERN]``, read with the standard library.

A shard is a plain tar file; a sample is the members sharing a key (the member name up to the
first dot of its base name): one image (``.jpg``, ``.png`` ...) and its class (``.cls``, the
label as decimal text). ``PATTERN`` expands braces as WebDataset does
(``shard-{000000..000999}.tar``, ``{a,b}``). Opening the data reads every shard's headers and
labels once (no image is decoded; nothing is unpickled or extracted to disk), which gives the
exact number of samples, so a run's epochs have exact lengths. Class names come from a
``classes.txt`` beside the shards if there is one (``vitpos shard`` writes it); without one,
labels may not exceed :data:`MAX_CLASSES`. A pattern may name at most
:data:`~.braces.MAX_SHARDS` shards, and each must end as a tar file does (two zero blocks),
so a shard cut short is an error naming it rather than a silently smaller epoch.

Without ``val=``, the last shard of the pattern is held out as the validation split; without
``test=``, the validation split is also the test split.
Training streams the shards (:mod:`.shard_stream`); evaluation reads samples by their offsets.
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from ..errors import VitposError
from .braces import expand_braces, iter_braces
from .crops import EvalCrop
from .dataset import DataInfo, DataSplits, ImageDataset, Size, as_size
from .decode import open_image
from .folders import EVAL_CROP, IMAGE_EXTENSIONS, IMAGENET_MEAN, IMAGENET_STD

__all__ = ["expand_braces", "ShardSample", "ShardImages", "load_shard_splits", "sample_key", "MAX_CLASSES"]

MAX_CLASSES = 100_000
"""The largest class count shards may imply without a ``classes.txt`` (ImageNet-21k has 21,841)."""
TAR_BLOCK = 512


def sample_key(name: str) -> tuple[str, str]:
    """(key, extension) of a member name: the extension starts at the first dot of the base name."""
    folder, _, base = name.rpartition("/")
    stem, _, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), ext.lower()


@dataclass(frozen=True)
class ShardSample:
    """Where one sample's image lies: shard file, byte offset and size of the image member; its label."""

    shard: Path
    offset: int
    size: int
    label: int
    name: str
    """The image member's name, for error messages."""

    def read(self) -> bytes:
        """The encoded image."""
        with open(self.shard, "rb") as f:
            f.seek(self.offset)
            return f.read(self.size)


def _index_shard(path: Path) -> list[ShardSample]:
    """The samples of one shard, in their order in the file."""
    images: dict[str, tarfile.TarInfo] = {}
    labels: dict[str, int] = {}
    end = 0
    try:
        with tarfile.open(path, "r:") as tar:
            for member in tar:
                end = member.offset_data + -(-member.size // TAR_BLOCK) * TAR_BLOCK
                if not member.isfile():
                    continue
                key, ext = sample_key(member.name)
                if f".{ext}" in IMAGE_EXTENSIONS:
                    images[key] = member
                elif ext == "cls":
                    raw = tar.extractfile(member)
                    assert raw is not None  # a regular file always has contents
                    text = raw.read(64).decode("ascii", "replace").strip()
                    if not (text.isascii() and text.isdigit()):
                        raise VitposError(f"shard {path}: {member.name} holds {text!r}, not a class number")
                    labels[key] = int(text)
            tar.fileobj.seek(end)  # a whole tar file has two zero blocks after its last member
            closing = tar.fileobj.read(2 * TAR_BLOCK)
    except (tarfile.TarError, OSError, EOFError) as err:
        raise VitposError(f"shard {path} is not a readable tar file ({err}); rewrite it with `vitpos shard`") from None
    if closing != bytes(2 * TAR_BLOCK):
        raise VitposError(
            f"shard {path} is truncated: it stops after byte {end} without the two zero blocks that end a tar file, "
            "so samples after that point are lost; copy or write the shard again"
        )
    unlabelled = sorted(set(images) - set(labels))
    if unlabelled:
        raise VitposError(f"shard {path}: image {unlabelled[0]} has no .cls member (and {len(unlabelled) - 1} more)")
    return [ShardSample(path, m.offset_data, m.size, labels[k], m.name) for k, m in images.items()]


def _index(pattern: str) -> list[list[ShardSample]]:
    paths = [Path(p).expanduser() for p in expand_braces(pattern)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"shard pattern {pattern!r}: {len(missing)} shard(s) missing, e.g. {missing[0]}")
    shards = [_index_shard(p) for p in paths]
    empty = [str(p) for p, s in zip(paths, shards, strict=True) if not s]
    if empty:
        raise VitposError(f"shard {empty[0]} holds no image with a .cls label; remove it from the pattern")
    return shards


def _class_names(pattern: str, shards: list[list[ShardSample]]) -> tuple[str, ...]:
    """The classes: the lines of ``classes.txt`` beside the shards, else ``0 .. max label`` (bounded)."""
    names_file = Path(next(iter_braces(pattern))).expanduser().parent / "classes.txt"
    names = tuple(names_file.read_text().split("\n")[:-1]) if names_file.is_file() else ()
    top = max((s for shard in shards for s in shard), key=lambda s: s.label)
    if names and top.label >= len(names):
        raise VitposError(
            f"shard {top.shard}: {top.name} has label {top.label}, but {names_file} names only {len(names)} classes; "
            "fix the label or add the missing class names"
        )
    if not names and top.label >= MAX_CLASSES:
        raise VitposError(
            f"shard {top.shard}: {top.name} has label {top.label}, more than the {MAX_CLASSES} classes vitpos assumes "
            f"without a class list; fix the label, or write {names_file} with one class name a line"
        )
    return names or tuple(str(i) for i in range(top.label + 1))


class ShardImages(ImageDataset):
    """The samples of some shards, read by offset (evaluation, per-image views) or streamed (training)."""

    per_image = True

    def __init__(self, shards: list[list[ShardSample]], info: DataInfo, size: Size | None = None) -> None:
        super().__init__(info, size)
        self.shards = shards
        self.samples = [s for shard in shards for s in shard]
        self.eval_crop, self.interpolation = EVAL_CROP, "bicubic"

    def __len__(self) -> int:
        return len(self.samples)

    def open_sample(self, index: int) -> tuple[Image.Image, torch.Tensor]:
        sample = self.samples[index]
        return open_image(sample.read(), f"{sample.shard}:{sample.name}"), torch.tensor(sample.label)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.image_size is None:
            raise RuntimeError("shards have no native image size; call at_size(size) first")
        crop = EvalCrop(self.image_size, "RGB", self.eval_crop, self.interpolation)
        images, labels = [], []
        for i in index.tolist():
            img, label = self.open_sample(i)
            with img:
                images.append(crop(img))
            labels.append(label)
        return torch.stack(images), torch.stack(labels)

    def at_size(self, size: int | tuple[int, int]) -> ShardImages:
        return self.evaluated_with(self.eval_crop, self.interpolation, as_size(size))

    def evaluated_with(self, eval_crop: float, interpolation: str, size: Size | None = None) -> ShardImages:
        """These samples evaluated with another crop fraction and resampling."""
        out = ShardImages(self.shards, self.info, size or self.image_size)
        out.eval_crop, out.interpolation = eval_crop, interpolation
        return out


_SPEC = re.compile(r"(?P<train>.*?)(?::val=(?P<val>.*?))?(?::test=(?P<test>.*))?")


def load_shard_splits(spec: str) -> DataSplits:
    """``wds:TRAIN[:val=VAL][:test=TEST]`` (see the module docstring)."""
    found = _SPEC.fullmatch(spec.removeprefix("wds:"))
    assert found is not None  # every part is optional
    train_pattern, val_pattern, test_pattern = found.group("train", "val", "test")
    if not train_pattern:
        raise VitposError(f"data spec {spec!r} needs a shard pattern: wds:PATTERN[:val=PATTERN][:test=PATTERN]")
    train = _index(train_pattern)
    if val_pattern:
        held = _index(val_pattern)
    elif len(train) > 1:
        train, held = train[:-1], train[-1:]
    else:
        raise VitposError(f"{spec}: one shard cannot be split into train and val; add :val=PATTERN or more shards")
    tested = _index(test_pattern) if test_pattern else held
    classes = _class_names(train_pattern, train + held + tested)
    info = DataInfo(spec, "classification", classes=classes, mean=IMAGENET_MEAN, std=IMAGENET_STD, photographic=True)
    tests = ShardImages(tested, info)
    return DataSplits(
        ShardImages(train, info), ShardImages(held, info), tests, test_name="test" if test_pattern else "val"
    )
