"""``vitpos buckets``: iRPE bucket maps around reference patches (iRPE supplement Fig. 6-9)."""

from __future__ import annotations

import argparse

import torch

from ..analysis.plots import save_heatmaps
from ..analysis.relative_maps import bucket_maps
from ..analysis.similarity import parse_references
from ..encodings.relative.buckets import INDEX_FUNCTIONS, METHODS, QUANT_VARIANTS
from ..errors import VitposError
from ..files import write_json
from ..spec import positive_float
from .model_args import add_output_argument, claim_output
from .options import option_type


def parse_grid(text: str) -> tuple[int, int]:
    """``"HxW"`` or ``"N"`` (square)."""
    try:
        parts = [int(v) for v in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"grid {text!r} must look like '14x14' or '14'")
    return (parts[0], parts[-1])


def run(args: argparse.Namespace) -> int:
    grid = args.grid
    refs = parse_references(args.refs, grid) if args.refs else [(grid[0] // 2, grid[1] // 2), (0, 0)]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        raise VitposError(f"--methods {args.methods!r} names no method; give one or more of {', '.join(METHODS)}")
    claim_output(args)
    rows, labels, counts = [], [], {}
    options = dict(ratio=args.ratio, index=args.index, quant=args.quant)
    print(
        f"{'method':10s} {'buckets':>7s} {'used here':>9s}   grid {grid[0]}x{grid[1]}, {args.index}, ratio {args.ratio}"
    )
    for method in methods:
        ids, count = bucket_maps(method, grid, refs, **options)
        per_axis = [ids[0], ids[1]] if method == "cross" else [ids]
        rows += per_axis
        labels += [f"{method} (rows)", f"{method} (cols)"] if method == "cross" else [method]
        counts[method] = {"buckets": count, "used": int(ids.unique().numel())}
        print(f"{method:10s} {count:7d} {counts[method]['used']:9d}")
    path = save_heatmaps(
        args.out / "buckets.png",
        torch.stack(rows),
        row_labels=labels,
        col_labels=[f"reference {r},{c}" for r, c in refs],
        markers=refs,
        categorical=True,
        title="iRPE buckets: cells of one colour share one relative encoding",
        xlabel="key column",
        ylabel="key row",
    )
    write_json(
        args.out / "buckets.json", {"grid": list(grid), "references": refs, "options": options, "methods": counts}
    )
    print(f"wrote {path}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("buckets", help="iRPE bucket maps around reference patches", description=__doc__)
    p.add_argument(
        "--methods", default=",".join(METHODS), help=f"comma-separated, from {', '.join(METHODS)} (default all)"
    )
    p.add_argument("--grid", type=parse_grid, default=(14, 14), help="grid HxW in patches (default 14x14)")
    p.add_argument("--refs", metavar="R,C;R,C", help="reference cells (default: the centre and a corner)")
    p.add_argument(
        "--ratio",
        type=option_type(positive_float),
        default=1.9,
        help="alpha of the piecewise index; beta = 2 alpha, gamma = 8 alpha",
    )
    p.add_argument("--index", choices=INDEX_FUNCTIONS, default="piecewise", help="index function (default piecewise)")
    p.add_argument(
        "--quant", choices=QUANT_VARIANTS, default="rank", help="quantisation variant (default rank, the paper)"
    )
    add_output_argument(p, "buckets")
    p.set_defaults(func=run)
