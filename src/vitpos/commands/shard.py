"""``vitpos shard``: write an image folder as WebDataset tar shards that ``--data wds:PATTERN`` reads.

``vitpos shard folder:PATH OUT`` writes ``OUT/train-000000.tar ...`` and ``OUT/val-000000.tar ...``
(the images' bytes as they are, with a ``.cls`` label each) plus ``OUT/classes.txt``, and prints
the data spec that trains on them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.folders import ImageFiles, load_folder_splits
from ..data.shards import write_shards
from ..errors import ConfigError


def run(args: argparse.Namespace) -> int:
    kind, _, path = args.source.partition(":")
    if kind != "folder" or not path:
        raise ConfigError(f"vitpos shard reads an image folder, written folder:PATH; got {args.source!r}")
    splits = load_folder_splits(path)
    out = Path(args.out)
    patterns = {}
    for name in ("train", "val"):
        split = splits.split(name)
        assert isinstance(split, ImageFiles)  # load_folder_splits hands out files
        written = write_shards(split, out, name, args.per_shard)
        patterns[name] = str(out / f"{name}-{{000000..{len(written) - 1:06d}}}.tar")
        print(f"{name}: {len(split)} images in {len(written)} shard(s)")
    print(f"train on them with --data 'wds:{patterns['train']}:val={patterns['val']}'")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shard",
        help="write an image folder as WebDataset tar shards (for --data wds:PATTERN)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="folder:PATH", help="the image folder (as --data names it)")
    p.add_argument("out", metavar="OUT", help="folder to write the shards into")
    p.add_argument("--per-shard", type=int, default=1000, metavar="N", help="images per shard (default: 1000)")
    p.set_defaults(func=run)
