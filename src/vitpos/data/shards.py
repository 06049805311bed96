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

import hashlib
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch
from PIL import Image

from ..errors import VitposError
from .braces import expand_braces, iter_braces
from .class_list import check_class_count, read_class_list
from .crops import EvalCrop
from .dataset import DataInfo, DataSplits, ImageDataset, Size, as_size
from .decode import open_image
from .folders import EVAL_CROP, IMAGE_EXTENSIONS, IMAGENET_MEAN, IMAGENET_STD
from .regular import not_a_file

__all__ = [
    "expand_braces",
    "ShardSample",
    "ShardImages",
    "load_shard_splits",
    "sample_key",
    "shard_fingerprint",
    "check_same_shards",
    "MAX_CLASSES",
]

MAX_CLASSES = 100_000
"""The largest class count shards may imply without a ``classes.txt`` (ImageNet-21k has 21,841)."""
TAR_BLOCK = 512
MAX_LABEL_BYTES = 64
"""The longest ``.cls`` member read as a class number."""


def sample_key(name: str) -> tuple[str, str]:
    """(key, extension) of a member name: the extension starts at the first dot of the base name."""
    folder, _, base = name.rpartition("/")
    stem, _, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), ext.lower()


Stamp = tuple[int, int, int, int]
"""A shard file as it was indexed: device, inode, size and modification time (ns)."""


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class ShardSample:
    """Where one sample's image lies: shard file, byte offset and size of the image member; its label."""

    shard: Path
    offset: int
    size: int
    label: int
    name: str
    """The image member's name, for error messages."""
    stamp: Stamp
    """The shard file as it was when the sample was indexed (:meth:`open` checks it)."""

    def open(self) -> BinaryIO:
        """The shard file, opened for reading; an error naming it if it is not the file that was indexed."""
        f = open(self.shard, "rb")  # noqa: SIM115 (handed to the caller, who closes it)
        now = _stamp(os.fstat(f.fileno()))
        if now != self.stamp:
            f.close()
            how = f"{self.stamp[2]} bytes then, {now[2]} now" if now[2] != self.stamp[2] else "rewritten or replaced"
            raise VitposError(
                f"shard {self.shard} changed after it was opened ({how}): its samples may no longer lie where they "
                "were indexed, and images would be read with other samples' labels. Put the shards back as they "
                "were and resume, or start a new run on the new shards (another --run-dir)"
            )
        return f

    def read_from(self, f: BinaryIO) -> bytes:
        """The encoded image, from this sample's shard opened by :meth:`open`."""
        f.seek(self.offset)
        data = f.read(self.size)
        if len(data) != self.size:
            raise VitposError(f"shard {self.shard} changed since it was opened: {self.name} ends early; open it again")
        return data

    def read(self) -> bytes:
        """The encoded image."""
        with self.open() as f:
            return self.read_from(f)


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member cannot be read as part of a sample (None: it can, or it is a folder, which holds nothing)."""
    if member.issym() or member.islnk():
        return f"is a {'symbolic' if member.issym() else 'hard'} link to {member.linkname!r}"
    if not member.isfile() and not member.isdir():
        return "is not a regular file"
    return None


def _label(path: Path, member: tarfile.TarInfo, tar: tarfile.TarFile) -> int:
    """The class number a ``.cls`` member holds (decimal text)."""
    if member.size > MAX_LABEL_BYTES:
        raise VitposError(
            f"shard {path}: {member.name} is {member.size} bytes long, not a class number (a .cls member holds "
            f"at most {MAX_LABEL_BYTES} bytes of decimal text)"
        )
    raw = tar.extractfile(member)
    assert raw is not None  # a regular file always has contents
    text = raw.read().decode("ascii", "replace").strip()
    if not (text.isascii() and text.isdigit()):
        raise VitposError(f"shard {path}: {member.name} holds {text!r}, not a class number")
    return int(text)


def _check_end(path: Path, f: BinaryIO, end: int) -> None:
    """Refuse a shard cut short (no two zero blocks at ``end``) or holding more after them (a second tar)."""
    f.seek(end)
    if f.read(2 * TAR_BLOCK) != bytes(2 * TAR_BLOCK):
        raise VitposError(
            f"shard {path} is truncated: it stops after byte {end} without the two zero blocks that end a tar file, "
            "so samples after that point are lost; copy or write the shard again"
        )
    while chunk := f.read(1 << 20):  # a tar file is padded with zeros to its record size, and nothing else
        if chunk.strip(b"\0"):
            at = f.tell() - len(chunk) + (len(chunk) - len(chunk.lstrip(b"\0")))
            raise VitposError(
                f"shard {path} holds more after the end of its tar archive (from byte {at}, e.g. a second tar "
                "appended with cat), which a tar reader stops before; write one tar a shard (vitpos shard, or "
                "tar --concatenate)"
            )


def _index_shard(path: Path) -> list[ShardSample]:
    """The samples of one shard, in their order in the file."""
    images: dict[str, tarfile.TarInfo] = {}
    labels: dict[str, int] = {}
    seen: dict[tuple[str, str], str] = {}
    others: dict[str, str] = {}
    end = 0
    try:
        with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r:") as tar:
            stamp = _stamp(os.fstat(f.fileno()))
            for member in tar:
                end = member.offset_data + -(-member.size // TAR_BLOCK) * TAR_BLOCK
                key, ext = sample_key(member.name)
                is_image, is_label = f".{ext}" in IMAGE_EXTENSIONS, ext == "cls"
                if not (is_image or is_label) or member.isdir():
                    others.setdefault(key, member.name)
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
                    labels[key] = _label(path, member, tar)
            _check_end(path, f, end)
    except (tarfile.TarError, OSError, EOFError) as err:
        raise VitposError(f"shard {path} is not a readable tar file ({err}); rewrite it with `vitpos shard`") from None
    unlabelled = sorted(set(images) - set(labels))
    if unlabelled:
        raise VitposError(f"shard {path}: image {unlabelled[0]} has no .cls member (and {len(unlabelled) - 1} more)")
    imageless = sorted(set(labels) - set(images))
    if imageless:
        beside = f" (beside it: {others[imageless[0]]})" if imageless[0] in others else ""
        raise VitposError(
            f"shard {path}: {len(imageless)} label(s) have no image, e.g. {imageless[0]}.cls{beside}; vitpos reads "
            f"images ending in {', '.join(IMAGE_EXTENSIONS)}: convert those samples or remove their labels"
        )
    return [ShardSample(path, m.offset_data, m.size, labels[k], m.name, stamp) for k, m in images.items()]


def _index(pattern: str) -> list[list[ShardSample]]:
    paths = [Path(p).expanduser() for p in expand_braces(pattern)]
    found = {p: not_a_file(p) for p in paths}
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
    names = read_class_list(names_file) if names_file.exists() or names_file.is_symlink() else ()
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

    def fingerprint(self) -> dict[str, str]:
        """Each shard's path and a digest of what was read from it (its size, members, offsets and labels)."""
        found = {}
        for shard in self.shards:
            index = "\n".join(f"{s.name} {s.offset} {s.size} {s.label}" for s in shard)
            found[str(shard[0].shard)] = f"{shard[0].stamp[2]} bytes, {hashlib.sha256(index.encode()).hexdigest()[:16]}"
        return found

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
    empty = [f"{name}=" for name, given in (("val", val_pattern), ("test", test_pattern)) if given == ""]
    if empty:
        raise VitposError(
            f"data spec {spec!r}: {empty[0]} names no shards; give it a pattern, or leave :{empty[0]} out"
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
    info = DataInfo(
        spec, "classification", classes=classes, mean=IMAGENET_MEAN, std=IMAGENET_STD, photographic=True,
        centre_cropped=True,
    )  # fmt: skip
    training = ShardImages(train, info, resample=resample)
    made = (
        f"training shards drawn at random with replacement ({RESAMPLE}): each epoch draws as many samples as the "
        f"{len(train)} training shard(s) hold ({len(training)}), some twice and some not at all"
        if resample
        else ""
    )
    test_name = "test" if test_pattern else "val"
    return DataSplits(training, ShardImages(held, info), ShardImages(tested, info), test_name=test_name, made=made)


def shard_fingerprint(data: DataSplits) -> dict[str, str]:
    """Every shard the splits read, with a digest of what was read from it (empty for data not read from shards)."""
    found: dict[str, str] = {}
    for split in (data.train, data.val, data.test):
        if isinstance(split, ShardImages):
            found |= split.fingerprint()
    return found


def check_same_shards(recorded: dict[str, str], now: dict[str, str], where: str) -> None:
    """Refuse shards that differ from those ``where`` recorded (rewritten, grown, removed or added)."""
    for shard in sorted(recorded.keys() | now.keys()):
        was, found = recorded.get(shard), now.get(shard)
        if was == found:
            continue
        what = "is new" if was is None else "is gone" if found is None else f"was rewritten ({was} then, {found} now)"
        raise VitposError(
            f"shard {shard} {what} since {where} was written: its samples are not those the run trained on. Put "
            "the shards back as they were to resume, or start a new run on these (another --run-dir)"
        )
