"""``vitpos shard``: write an image folder as WebDataset tar shards that ``--data wds:PATTERN`` reads.

``vitpos shard folder:PATH OUT`` writes every split the folder has (``OUT/train-000000.tar ...``,
``val-...``, and ``test-...`` when the test split is a split of its own) with the images' bytes
as they are and a ``.cls`` label each, plus ``OUT/classes.txt``, and prints the data spec that
trains on them. The samples of each split are shuffled before writing (seeded by ``--seed``;
``--no-shuffle`` keeps the folder's order), so that a shard, and a shuffle buffer reading a few
shards, holds many classes. A folder without ``train/`` and ``val/`` is split at random, and
the command says so. ``OUT`` must be new or empty; ``--overwrite`` replaces shards it wrote
before (the files its manifest ``OUT/.vitpos-manifest.jsonl`` lists, and nothing else), all at once
(an ``OUT`` that is a link: the folder it names): the new ones are written beside it and moved into
place when complete; an interrupted run leaves nothing behind (after SIGKILL, the next run
removes what it left, and says so).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..data.class_list import class_list_text
from ..data.folders import ImageFiles, load_folder_splits
from ..data.shard_writer import (
    COMMAND,
    check_output_folder,
    clear_leftovers,
    output_folder,
    replacing_folder,
    write_shards,
)
from ..errors import ConfigError
from ..ownership import record
from ..spec import non_negative_int, positive_int
from .options import option_type


def _files(splits, name: str) -> ImageFiles:
    split = splits.split(name)
    assert isinstance(split, ImageFiles)  # load_folder_splits hands out files
    return split


def run(args: argparse.Namespace) -> int:
    kind, _, path = args.source.partition(":")
    if kind != "folder" or not path:
        raise ConfigError(f"vitpos shard reads an image folder, written folder:PATH; got {args.source!r}")
    out = output_folder(Path(args.out).expanduser())
    check_output_folder(out, args.overwrite)
    splits = load_folder_splits(path)
    names = ["train", "val"]
    if _files(splits, "test").samples != _files(splits, "val").samples:  # a test split of its own
        names.append("test")
    files = {name: _files(splits, name) for name in names}
    rng = np.random.default_rng(args.seed)
    orders = {
        name: list(range(len(f))) if not args.shuffle else rng.permutation(len(f)).tolist() for name, f in files.items()
    }
    if splits.made:
        print(f"{path} has no train/ or val/ folder, so the splits are made here: {splits.made}")
    for leftover in clear_leftovers(out):
        print(f"removed {leftover}, the temporary folder of an earlier vitpos shard into {out} that was killed")
    bar = tqdm(
        total=sum(len(f) for f in files.values()), unit="img", desc="shard", file=sys.stderr, disable=not args.progress
    )
    with bar, replacing_folder(out) as tmp:
        counts = {
            name: len(write_shards(f, orders[name], tmp, name, args.per_shard, lambda: bar.update(1)))
            for name, f in files.items()
        }
        (tmp / "classes.txt").write_text(class_list_text(splits.info.classes), encoding="utf-8")
        record(tmp / "classes.txt", COMMAND)
    how = (
        f"shuffled with seed {args.seed} (--no-shuffle keeps the folder's order)"
        if args.shuffle
        else "in the folder's order"
    )
    print(f"wrote {out} ({len(splits.info.classes)} classes in classes.txt), each split's images {how}:")
    patterns = {}
    for name, f in files.items():
        patterns[name] = str(out / f"{name}-{{000000..{counts[name] - 1:06d}}}.tar")
        print(f"  {name}: {len(f)} images in {counts[name]} shard(s), {patterns[name]}")
    spec = ":".join([f"wds:{patterns['train']}", *(f"{n}={patterns[n]}" for n in names[1:])])
    print(f"train on them with --data '{spec}'")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shard",
        help="write an image folder as WebDataset tar shards (for --data wds:PATTERN)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="folder:PATH", help="the image folder (as --data names it)")
    p.add_argument("out", metavar="OUT", help="a new or empty folder to write the shards into")
    p.add_argument(
        "--per-shard",
        type=option_type(positive_int),
        default=1000,
        metavar="N",
        help="images per shard (default: 1000)",
    )
    p.add_argument("--seed", type=option_type(non_negative_int), default=0, help="seed of the shuffle (default: 0)")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="write each split in the folder's order")
    p.add_argument("--overwrite", action="store_true", help="replace the shards OUT holds (all at once)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    p.set_defaults(func=run)
