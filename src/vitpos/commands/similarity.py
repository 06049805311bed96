"""``vitpos similarity``: cosine-similarity maps of position encodings (thesis Fig. 5, LaPE Fig. 4)."""

from __future__ import annotations

import argparse

import torch

from ..analysis.plots import save_heatmaps
from ..analysis.similarity import default_references, locality, parse_references, similarity_maps
from ..analysis.tables import layer_position_encodings, native_grid
from ..files import write_json
from .model_args import add_model_arguments, add_output_argument, build_model


def run(args: argparse.Namespace) -> int:
    model = build_model(args)
    grid = native_grid(model)
    refs = parse_references(args.refs, grid) if args.refs else default_references(grid)
    tables = layer_position_encodings(model, grid)
    print(f"{'table':12s} {'locality':>8s}   (neighbour minus mean cosine similarity)")
    scores = {}
    for name, table in tables.items():
        scores[name] = locality(table, grid)
        print(f"{name:12s} {scores[name]:8.3f}")
    path = save_heatmaps(
        args.out / "similarity.png",
        torch.stack([similarity_maps(table, grid, refs) for table in tables.values()]),
        row_labels=list(tables), col_labels=[f"cell {r},{c}" for r, c in refs], markers=refs,
        title="cosine similarity of each cell's position encoding to the reference cell (star)",
        colorbar_label="cosine similarity",
    )
    write_json(args.out / "similarity.json", {"references": refs, "locality": scores})
    print(f"wrote {path}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("similarity", help="cosine-similarity maps of position encodings", description=__doc__)
    add_model_arguments(p)
    p.add_argument("--refs", metavar="R,C;R,C", help="reference cells (default: a corner, an edge cell, the centre)")
    add_output_argument(p, "similarity")
    p.set_defaults(func=run)
