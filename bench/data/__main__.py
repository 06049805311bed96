"""``python -m bench.data``: can the image pipeline feed a GPU? Per-worker decode + crop, per-batch augmentation.

Per image (one loading worker = one process, one thread): open a full-size JPEG, DeiT's
RandomResizedCrop of the whole image to 224 px and a flip (:class:`vitpos.data.crops.TrainCrop`),
with Pillow's draft mode (the default) and with a full decode (the baseline), and the evaluation
crop; then the training loader on a generated JPEG folder at the default worker count (0: the
main process) and at one worker per core. Per batch, on this machine's CPU: the DeiT recipe's
device-side augmentation (RandAugment m9/0.5, normalisation, random erasing 0.25, mixup 0.8 /
cutmix 1.0) on 224-px images, and with ``--against OTHER/src`` the same augmentation built from
another checkout's code in the same rounds. Rounds alternate the variants and report the median
(min-max). Rates are per second of the process's own CPU time, which is what one worker on a core
of its own reaches, whatever else the machine runs; wall-clock rates are shown beside them. Last,
``vitpos train --recipe deit`` as run on the folder and on ``wds:`` shards of it, against its parts
alone (:mod:`bench.data.pipeline`). ``--out BENCHMARKS.md`` writes the section.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import io
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import sklearn.datasets
import torch
from PIL import Image

from vitpos.data.crops import EvalCrop, TrainCrop
from vitpos.data.dataset import DataInfo
from vitpos.data.decode import open_image
from vitpos.data.transforms import Augment
from vitpos.engine.config import TrainConfig
from vitpos.engine.pipeline import build_augment
from vitpos.engine.recipes import get_recipe

from ..gpu.report import replace_section
from .pipeline import RunShape, jpeg_folder, loading_rate, measure, where_time_goes

HEADING = "## Data pipeline: decode + crop per worker, augmentation per batch"
PHOTOS = Path(sklearn.datasets.__file__).parent / "images"
"""scikit-learn's two sample photographs: 640 x 427 JPEGs, about ImageNet's average size (~400 x 350) or larger."""
DEIT = "DeiT recipe (RandAugment, erasing, mixup/cutmix, normalise)"
GPU_TARGET = 5475
"""Images per second one H200 trained DeiT-S at, bf16 autocast, eager, batch 256 (BENCHMARKS.md's quick check,
measured at commit 6e9ae7c)."""


class FullDecode(TrainCrop):
    """TrainCrop with the JPEG decoded at full size first (no draft mode): the baseline."""

    def __call__(self, img: Image.Image, rng: np.random.Generator) -> torch.Tensor:
        img.load()  # decoding now makes the later draft request a no-op
        return super().__call__(img, rng)


Rates = dict[str, tuple[list[float], list[float]]]
"""Per variant: items per CPU second and per wall-clock second, one of each per round."""


def _rounds(fns: dict[str, Callable[[], int]], repeats: int) -> Rates:
    """Each variant's rates, once per round, the variants in turn; ``fn`` returns the items it handled."""
    out: Rates = {name: ([], []) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            items = fn()
            out[name][0].append(items / (time.process_time() - cpu))
            out[name][1].append(items / (time.perf_counter() - wall))
    return out


def machine() -> str:
    """The CPU model (from /proc/cpuinfo where there is one) and the load while measuring."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    cores = sum(line.startswith("processor") for line in lines) or "?"
    return f"{model}, {cores} cores, load average {os.getloadavg()[0]:.1f}"


def _enlarged(data: bytes, factor: int) -> bytes:
    """The photograph ``factor`` times larger per side, re-encoded as JPEG (quality 90)."""
    with Image.open(io.BytesIO(data)) as img:
        big = img.convert("RGB").resize((img.width * factor, img.height * factor), Image.Resampling.BICUBIC)
    out = io.BytesIO()
    big.save(out, "JPEG", quality=90)
    return out.getvalue()


def per_image_rates(n: int, repeats: int) -> Rates:
    """Images per second of one process: train crop (draft, full decode), evaluation crop; then 4x larger photos."""
    photos = [f.read_bytes() for f in sorted(PHOTOS.glob("*.jpg"))]
    large = [_enlarged(d, 4) for d in photos]
    rng = np.random.default_rng(0)
    train_crop, full_decode, eval_crop = TrainCrop((224, 224)), FullDecode((224, 224)), EvalCrop((224, 224))
    variants: dict[str, tuple[list[bytes], Callable[[Image.Image], torch.Tensor], int]] = {
        "train crop, draft decode": (photos, lambda img: train_crop(img, rng), n),
        "train crop, full decode": (photos, lambda img: full_decode(img, rng), n),
        "eval crop (resize 256, centre 224), draft": (photos, eval_crop, n),
        "2560 x 1708 photo: train crop, draft decode": (large, lambda img: train_crop(img, rng), n // 8),
        "2560 x 1708 photo: train crop, full decode": (large, lambda img: full_decode(img, rng), n // 8),
    }

    def timed(data: list[bytes], crop: Callable[[Image.Image], torch.Tensor], count: int) -> Callable[[], int]:
        def run() -> int:
            for i in range(count):
                with open_image(data[i % len(data)]) as img:
                    crop(img)
            return count

        return run

    return _rounds({name: timed(*variant) for name, variant in variants.items()}, repeats)


def _deit_augment(info: DataInfo) -> tuple[TrainConfig, Augment]:
    recipe = TrainConfig.from_dict(dict(get_recipe("deit").train))
    per_batch = {"crop_scale": None, "hflip": 0.0}  # crops and flips are done per image, in the workers
    return recipe, dataclasses.replace(build_augment(recipe, info), **per_batch)


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"--against: no {path.name} in {path.parent}; give the src/ folder of another checkout")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def against_augment(src: Path, recipe: TrainConfig, ours: Augment, info: DataInfo) -> Callable:
    """The same augmentation built from another checkout's ``src/vitpos/data`` transforms and RandAugment."""
    data = src / "vitpos" / "data"
    transforms = _load_module("_against_transforms", data / "transforms.py")
    randaugment = _load_module("_against_randaugment", data / "randaugment.py")
    fields = {f.name: getattr(ours, f.name) for f in dataclasses.fields(ours)}
    fields["randaugment"] = randaugment.RandAugment.from_spec(recipe.randaugment, info.mean)
    return transforms.Augment(**fields)


def per_batch_rates(batch: int, repeats: int, against: Path | None) -> Rates:
    """Images per second of the DeiT recipe's device-side augmentation on CPU (and of another checkout's, in
    the same rounds), and of normalisation alone."""
    info = DataInfo("bench", "classification", classes=tuple(str(i) for i in range(1000)), photographic=True)
    recipe, deit = _deit_augment(info)
    bare = recipe.replace(randaugment=None, random_erasing=0.0, mixup=0.0, cutmix=0.0)
    plain = dataclasses.replace(build_augment(bare, info), crop_scale=None, hflip=0.0)
    images = torch.randint(0, 256, (batch, 3, 224, 224), dtype=torch.uint8)
    labels = torch.randint(0, 1000, (batch,))

    def timed(augment: Callable) -> Callable[[], float]:
        rounds = iter(range(repeats))

        def run() -> float:
            torch.manual_seed(next(rounds))  # round r draws the same way for every variant
            augment(images, labels)
            return batch

        return run

    fns = {DEIT: timed(deit)}
    if against is not None:
        fns[f"{DEIT}, {against}"] = timed(against_augment(against, recipe, deit, info))
    fns["normalise only"] = timed(plain)
    return _rounds(fns, repeats)


def loader_rates(shape: RunShape, root: Path, counts: tuple[int, ...]) -> dict[int, float]:
    """Images per wall second of the training loader on a JPEG folder (decode + crop), per worker count."""
    folder = jpeg_folder(root, shape.batch * shape.steps, shape.classes)
    return {n: loading_rate(dataclasses.replace(shape, workers=n), f"folder:{folder}") for n in counts}


def _cell(rates: list[float]) -> str:
    return f"{statistics.median(rates):.0f} ({min(rates):.0f}–{max(rates):.0f})"


def _table(title: str, rates: Rates) -> list[str]:
    rows = [f"| {name} | {_cell(cpu)} | {_cell(wall)} |" for name, (cpu, wall) in rates.items()]
    return [f"| {title} | images per CPU second | images per wall second |", "| --- | ---: | ---: |", *rows]


def _median(rates: Rates, name: str, wall: bool = False) -> float:
    return statistics.median(rates[name][1 if wall else 0])


def report(image: Rates, batch: Rates, loaders: dict[int, float], e2e: dict[str, float] | None, args, load: str) -> str:
    """The markdown section."""
    draft, full = _median(image, "train crop, draft decode"), _median(image, "train crop, full decode")
    large_draft = _median(image, "2560 x 1708 photo: train crop, draft decode")
    large_full = _median(image, "2560 x 1708 photo: train crop, full decode")
    workers = math.ceil(GPU_TARGET / draft)
    lines = [
        HEADING,
        "",
        f"- Machine: {load} (shared with other jobs while measuring); torch {torch.__version__}; "
        f"Python {platform.python_version()}",
        f"- Command: `python -m bench.data {shlex.join(sys.argv[1:])}`",
        f"- Images: scikit-learn's sample photographs (640 x 427 JPEG); output 224 x 224. Median over {args.repeats} "
        "rounds (min–max); the variants alternate within a round. CPU seconds are the process's own (what a worker "
        "on a core of its own reaches); wall seconds include waiting for the shared cores. One torch thread.",
        "",
        *_table("per image, one worker process", image),
        "",
        f"Draft mode: ×{draft / full:.2f} the images per CPU second of a full decode on these photographs, "
        f"×{large_draft / large_full:.2f} on the same photographs enlarged 4 times (in the same rounds). It decodes "
        "at 1/2, 1/4 or 1/8 scale only where the crop keeps at least the output's pixels at that scale, so it "
        "gains on photographs much larger than the crop; a 224-px crop of a 640-px photograph rarely qualifies.",
        "",
        f"| training loader on a JPEG folder (decode + crop, batches of {args.train_batch}) | images per wall second |",
        "| --- | ---: |",
        *(f"| {n} workers{' (the default)' if n == 0 else ''} | {rate:.0f} |" for n, rate in loaders.items()),
        "",
        *_table(f"per batch of {args.batch}, on this CPU", batch),
        "",
    ]
    if args.against is not None:
        theirs = f"{DEIT}, {args.against}"
        cpu = _median(batch, DEIT) / _median(batch, theirs)
        wall = _median(batch, DEIT, True) / _median(batch, theirs, True)
        paired = [a / b for a, b in zip(batch[DEIT][0], batch[theirs][0], strict=True)]
        lines += [
            f"The DeiT recipe's augmentation: ×{cpu:.2f} the images per CPU second of the tree in `{args.against}` "
            f"(medians; round by round ×{statistics.median(paired):.2f}, {min(paired):.2f}–{max(paired):.2f}; "
            f"×{wall:.2f} per wall second).",
            "",
        ]
    if e2e is not None:
        lines += [
            f"End to end on this CPU: `vitpos train --recipe deit` with {args.train_model} "
            f"(depth {args.train_depth}), batches of {args.train_batch}, {args.train_steps} steps, "
            f"{args.train_workers} loading workers, {len(e2e)} rates in images per wall second:",
            "",
            "| part | images per wall second |",
            "| --- | ---: |",
            *(f"| {name} | {rate:.1f} |" for name, rate in e2e.items()),
            "",
            where_time_goes(e2e),
            "",
        ]
    lines.append(
        f"One H200 trains DeiT-S in bf16 at {GPU_TARGET:,} images/s (an eager step of batch 256; BENCHMARKS.md's "
        f"quick check). At {draft:.0f} images per CPU second per worker, decode + crop needs **{workers} "
        "loading workers** (a core each), before the DataLoader's own cost of handing batches between processes. "
        "ImageNet's photographs have about half the pixels of these, so this errs high. The per-batch augmentation "
        'runs on the training device; its cost on a GPU is part "augment" of `python -m bench.gpu --quick` (the '
        'whole path part "data"), and the CPU figures above are no guide to it.'
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.data", description=__doc__)
    p.add_argument("--images", type=int, default=200, help="images per timing of the per-image work")
    p.add_argument("--batch", type=int, default=64, help="images per batch of the device-side augmentation")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--against", type=Path, help="also time the augmentation of another checkout's src/ folder")
    p.add_argument("--train-model", default="deit_tiny_patch16_224", help="model of the end-to-end runs")
    p.add_argument("--train-depth", type=int, default=2, help="its depth (short, to keep the CPU runs short)")
    p.add_argument("--train-batch", type=int, default=32)
    p.add_argument("--train-steps", type=int, default=8)
    p.add_argument("--train-workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--no-train", action="store_true", help="skip the end-to-end runs")
    p.add_argument("--out", type=Path, help="write the section into this markdown file (e.g. BENCHMARKS.md)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load = machine()
    shape = RunShape(
        torch.device("cpu"),
        model=args.train_model,
        model_args={"depth": args.train_depth},
        batch=args.train_batch,
        steps=args.train_steps,
        workers=args.train_workers,
    )
    image, batch = per_image_rates(args.images, args.repeats), per_batch_rates(args.batch, args.repeats, args.against)
    with tempfile.TemporaryDirectory() as tmp:
        loaders = loader_rates(shape, Path(tmp) / "loader", (0, args.train_workers))
        e2e = None if args.no_train else dict(measure(shape, Path(tmp) / "e2e"))
    text = report(image, batch, loaders, e2e, args, load)
    print(text)
    if args.out:
        old = args.out.read_text() if args.out.is_file() else "# Benchmarks\n"
        args.out.write_text(replace_section(old, text, HEADING))
    return 0


if __name__ == "__main__":
    sys.exit(main())
