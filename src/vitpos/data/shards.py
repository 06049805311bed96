"""WebDataset tar shards: ``wds:PATTERN[:val=PATTERN]``, read with the standard library, and written from a folder.

A shard is a plain tar file; a sample is the members sharing a key (the member name up to the
first dot of its base name): one image (``.jpg``, ``.png`` ...) and its class (``.cls``, the
label as decimal text). ``PATTERN`` expands braces as WebDataset does
(``shard-{000000..000999}.tar``, ``{a,b}``). Opening the data reads every shard's headers and
labels once (no image is decoded; nothing is unpickled or extracted to disk), which gives the
exact number of samples, so a run's epochs have exact lengths. Class names come from a
``classes.txt`` beside the shards if there is one (``vitpos shard`` writes it).

Without ``val=``, the last shard of the pattern is held out as the validation and test split.
Training streams the shards (:mod:`.shard_stream`); evaluation reads samples by their offsets.
"""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from .crops import EvalCrop
from .dataset import DataInfo, DataSplits, ImageDataset, Size, as_size
from .decode import open_image
from .folders import EVAL_CROP, IMAGE_EXTENSIONS, IMAGENET_MEAN, IMAGENET_STD, ImageFiles

__all__ = ["expand_braces", "ShardSample", "ShardImages", "load_shard_splits", "write_shards", "sample_key"]

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")


def expand_braces(pattern: str) -> list[str]:
    """Every name ``pattern`` stands for: ``{000..002}`` is a zero-padded range, ``{a,b}`` a list."""
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    end = pattern.find("}", start)
    if end < 0:
        raise ValueError(f"shard pattern {pattern!r} opens a brace it never closes")
    body, head, tail = pattern[start + 1 : end], pattern[:start], pattern[end + 1 :]
    found = _RANGE.fullmatch("{" + body + "}")
    if found:
        lo, hi = found.groups()
        if int(hi) < int(lo):
            raise ValueError(f"shard pattern {pattern!r}: the range {{{lo}..{hi}}} runs backwards")
        options = [f"{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
    else:
        options = body.split(",")
    return [head + option + rest for option in options for rest in expand_braces(tail)]


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
    try:
        with tarfile.open(path, "r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                key, ext = sample_key(member.name)
                if f".{ext}" in IMAGE_EXTENSIONS:
                    images[key] = member
                elif ext == "cls":
                    raw = tar.extractfile(member)
                    assert raw is not None  # a regular file always has contents
                    text = raw.read(64).decode("ascii", "replace").strip()
                    if not text.isdigit():
                        raise ValueError(f"shard {path}: {member.name} holds {text!r}, not a class number")
                    labels[key] = int(text)
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"shard {path} is not a readable tar file ({err}); rewrite it with `vitpos shard`") from None
    unlabelled = sorted(set(images) - set(labels))
    if unlabelled:
        raise ValueError(f"shard {path}: image {unlabelled[0]} has no .cls member (and {len(unlabelled) - 1} more)")
    return [ShardSample(path, m.offset_data, m.size, labels[k], m.name) for k, m in images.items()]


def _index(pattern: str) -> list[list[ShardSample]]:
    paths = [Path(p).expanduser() for p in expand_braces(pattern)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"shard pattern {pattern!r}: {len(missing)} shard(s) missing, e.g. {missing[0]}")
    shards = [_index_shard(p) for p in paths]
    empty = [str(p) for p, s in zip(paths, shards, strict=True) if not s]
    if empty:
        raise ValueError(f"shard {empty[0]} holds no image with a .cls label; remove it from the pattern")
    return shards


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


def load_shard_splits(spec: str) -> DataSplits:
    """``wds:TRAIN[:val=VAL]`` (see the module docstring)."""
    rest = spec.removeprefix("wds:")
    train_pattern, _, val_pattern = rest.partition(":val=")
    if not train_pattern:
        raise ValueError(f"data spec {spec!r} needs a shard pattern: wds:PATTERN[:val=PATTERN]")
    train = _index(train_pattern)
    if val_pattern:
        held = _index(val_pattern)
    elif len(train) > 1:
        train, held = train[:-1], train[-1:]
    else:
        raise ValueError(f"{spec}: one shard cannot be split into train and val; add :val=PATTERN or more shards")
    labels = {s.label for shard in train + held for s in shard}
    names_file = Path(expand_braces(train_pattern)[0]).expanduser().parent / "classes.txt"
    names = tuple(names_file.read_text().split("\n")[:-1]) if names_file.is_file() else ()
    classes = names or tuple(str(i) for i in range(max(labels) + 1))
    if max(labels) >= len(classes):
        raise ValueError(f"{spec}: label {max(labels)} but {names_file} names only {len(classes)} classes")
    info = DataInfo(spec, "classification", classes=classes, mean=IMAGENET_MEAN, std=IMAGENET_STD, photographic=True)
    val = ShardImages(held, info)
    return DataSplits(ShardImages(train, info), val, val, test_name="val")


def write_shards(files: ImageFiles, out: Path, prefix: str, per_shard: int) -> list[Path]:
    """Write the samples of ``files`` in order into ``out/prefix-000000.tar`` ...: image bytes as they are, and .cls."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for first in range(0, len(files.samples), per_shard):
        path = out / f"{prefix}-{first // per_shard:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i, (image, label) in enumerate(files.samples[first : first + per_shard], start=first):
                key = f"{i:09d}"
                for name, data in ((f"{key}{image.suffix.lower()}", image.read_bytes()), (f"{key}.cls", b"%d" % label)):
                    member = tarfile.TarInfo(name)
                    member.size, member.mode = len(data), 0o444
                    tar.addfile(member, io.BytesIO(data))
        written.append(path)
    (out / "classes.txt").write_text("".join(f"{name}\n" for name in files.info.classes))
    return written
