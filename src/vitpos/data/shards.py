"""WebDataset tar shards: ``wds:PATTERN[:val=PATTERN][:test=PATTERN][:resample]``, read with the standard library.

A shard is a plain tar file; a sample is the members sharing a key (the member name up to the
first dot of its base name): one image (``.jpg``, ``.png`` ...) and its class (``.cls``, the
label as decimal text). ``PATTERN`` expands braces as WebDataset does
(``shard-{000000..000999}.tar``, ``{a,b}``). Opening the data reads every shard's headers and
labels once (no image is decoded; nothing is unpickled or extracted to disk), which gives the
exact number of samples, so a run's epochs have exact lengths. Class names come from a
``classes.txt`` beside the shards if there is one (``vitpos shard`` writes it); without one,
labels may not exceed :data:`MAX_CLASSES` (:mod:`.class_list` says how the list is read). A
pattern may name at most :data:`~.braces.MAX_SHARDS` shards, each a regular file that ends as a
tar file does (two zero blocks), so a shard cut short is an error naming it rather than a
silently smaller epoch. A sample's image and label are files in the shard: a link, or a key
whose image or label comes twice, is refused with the shard and member named.

Without ``val=``, the last shard of the pattern is held out as the validation split; without
``test=``, the validation split is also the test split.
Training streams the shards (:mod:`.shard_stream`), each sample once an epoch, or with ``:resample``
draws shards at random with replacement; evaluation reads samples by their offsets.
"""

from __future__ import annotations

import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from ..errors import VitposError
from .braces import expand_braces, iter_braces
from .class_list import check_class_count, read_class_list
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


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member cannot be read as part of a sample (None: it can, or it is a folder, which holds nothing)."""
    if member.issym() or member.islnk():
        return f"is a {'symbolic' if member.issym() else 'hard'} link to {member.linkname!r}"
    if not member.isfile() and not member.isdir():
        return "is not a regular file"
    return None


def _index_shard(path: Path) -> list[ShardSample]:
    """The samples of one shard, in their order in the file."""
    images: dict[str, tarfile.TarInfo] = {}
    labels: dict[str, int] = {}
    seen: dict[tuple[str, str], str] = {}
    end = 0
    try:
        with tarfile.open(path, "r:") as tar:
            for member in tar:
                end = member.offset_data + -(-member.size // TAR_BLOCK) * TAR_BLOCK
                key, ext = sample_key(member.name)
                is_image, is_label = f".{ext}" in IMAGE_EXTENSIONS, ext == "cls"
                if not (is_image or is_label) or member.isdir():
                    continue
                problem = _member_problem(member)
                if problem is not None:
                    raise VitposError(
                        f"shard {path}: member {member.name} {problem}; a sample's image and label must be files "
                        "in the shard (write it again with `vitpos shard`)"
                    )
                kind = "image" if is_image else "label"
                if (key, kind) in seen:
                    raise VitposError(
                        f"shard {path}: member {member.name} is a second {kind} of sample {key} (the first is "
                        f"{seen[key, kind]}); give each sample a key of its own"
                    )
                seen[key, kind] = member.name
                if is_image:
                    images[key] = member
                else:
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


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (None: it is one)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a named pipe (FIFO)", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}  # fmt: skip
    return next((what for test, what in kinds.items() if test(mode)), "not a regular file")


def _index(pattern: str) -> list[list[ShardSample]]:
    paths = [Path(p).expanduser() for p in expand_braces(pattern)]
    found = {p: _not_a_file(p) for p in paths}
    missing = [str(p) for p, what in found.items() if what == "missing"]
    if missing:
        raise FileNotFoundError(f"shard pattern {pattern!r}: {len(missing)} shard(s) missing, e.g. {missing[0]}")
    odd = next(((p, what) for p, what in found.items() if what is not None), None)
    if odd is not None:
        raise VitposError(
            f"shard {odd[0]} is {odd[1]}, not a regular file; a shard is a tar file (name the files in the pattern)"
        )
    shards = [_index_shard(p) for p in paths]
    empty = [str(p) for p, s in zip(paths, shards, strict=True) if not s]
    if empty:
        raise VitposError(f"shard {empty[0]} holds no image with a .cls label; remove it from the pattern")
    return shards


def _class_names(pattern: str, shards: list[list[ShardSample]]) -> tuple[str, ...]:
    """The classes: the lines of ``classes.txt`` beside the shards, else ``0 .. max label`` (bounded)."""
    names_file = Path(next(iter_braces(pattern))).expanduser().parent / "classes.txt"
    names = read_class_list(names_file) if names_file.exists() else ()
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
    if not names:
        names = tuple(str(i) for i in range(top.label + 1))
        check_class_count(names, f"shards {pattern} (labels up to {top.label}, no {names_file})")
    return names


class ShardImages(ImageDataset):
    """The samples of some shards, read by offset (evaluation, per-image views) or streamed (training)."""

    per_image = True

    def __init__(
        self, shards: list[list[ShardSample]], info: DataInfo, size: Size | None = None, resample: bool = False
    ) -> None:
        super().__init__(info, size)
        self.shards = shards
        self.resample = resample
        """Training draws shards at random with replacement (``:resample``) instead of reading each once."""
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
        out = ShardImages(self.shards, self.info, size or self.image_size, self.resample)
        out.eval_crop, out.interpolation = eval_crop, interpolation
        return out


RESAMPLE = ":resample"
"""The spec's ending that makes training draw shards with replacement (WebDataset's resampled mode)."""
_SPEC = re.compile(r"(?P<train>.*?)(?::val=(?P<val>.*?))?(?::test=(?P<test>.*))?")


def load_shard_splits(spec: str) -> DataSplits:
    """``wds:TRAIN[:val=VAL][:test=TEST][:resample]`` (see the module docstring)."""
    body = spec.removeprefix("wds:")
    resample = body.endswith(RESAMPLE)
    found = _SPEC.fullmatch(body.removesuffix(RESAMPLE))
    assert found is not None  # every part is optional
    train_pattern, val_pattern, test_pattern = found.group("train", "val", "test")
    if not train_pattern:
        raise VitposError(
            f"data spec {spec!r} needs a shard pattern: wds:PATTERN[:val=PATTERN][:test=PATTERN][:resample]"
        )
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
    training = ShardImages(train, info, resample=resample)
    made = (
        f"training shards drawn at random with replacement ({RESAMPLE}): each epoch draws as many samples as the "
        f"{len(train)} training shard(s) hold ({len(training)}), some twice and some not at all"
        if resample
        else ""
    )
    test_name = "test" if test_pattern else "val"
    return DataSplits(training, ShardImages(held, info), ShardImages(tested, info), test_name=test_name, made=made)
