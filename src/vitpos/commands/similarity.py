"""``vitpos similarity``: cosine-similarity maps of position encodings (thesis Fig. 5, LaPE Fig. 4).

On a pyramid host every stage has its own tables on its own grid: one figure per stage.
"""

from __future__ import annotations

import argparse

import torch

from ..analysis.plots import save_heatmap_pages
from ..analysis.similarity import default_references, locality, parse_references, similarity_maps
from ..analysis.stages import native_grid, stage_name
from ..analysis.tables import layer_position_encodings
from ..files import write_json
from .model_args import (
    add_model_arguments,
    add_output_argument,
    add_stage_argument,
    build_host,
    claim_output,
    figure_path,
    model_label,
)
from .stage_runs import each_stage


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    print(f"{'table':20s} {'locality':>8s}   (neighbour minus mean cosine similarity)")
    stages, paths = [], []

    def map_stage(stage: int) -> None:
        grid = native_grid(model, stage)
        where = stage_name(model, stage, f"{grid[0]}x{grid[1]} grid")
        refs = parse_references(args.refs, grid) if args.refs else default_references(grid)
        tables = layer_position_encodings(model, grid, stage)
        scores = {}
        for name, table in tables.items():
            scores[name] = locality(table, grid)
            print(f"{stage_name(model, stage, name):20s} {scores[name]:8.3f}")
        paths.extend(
            save_heatmap_pages(
                figure_path(args.out, "similarity", model, stage),
                torch.stack([similarity_maps(table, grid, refs) for table in tables.values()]),
                row_labels=list(tables),
                col_labels=[f"cell {r},{c}" for r, c in refs],
                markers=refs,
                title=f"cosine similarity of each cell's position encoding to the reference cell (star): "
                f"{model_label(args)}, {where}",
                colorbar_label="cosine similarity",
                diverging=True,
                vmin=-1.0,
                vmax=1.0,
            )
        )
        stages.append({"stage": stage, "grid": list(grid), "references": refs, "locality": scores})

    each_stage(model, args.stage, "similarity maps", map_stage)
    write_json(args.out / "similarity.json", {"stages": stages})
    print("wrote " + ", ".join(map(str, paths)))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("similarity", help="cosine-similarity maps of position encodings", description=__doc__)
    add_model_arguments(p)
    add_stage_argument(p, "all", "absolute table and per-block encodings")
    p.add_argument("--refs", metavar="R,C;R,C", help="reference cells (default: a corner, an edge cell, the centre)")
    add_output_argument(p, "similarity")
    p.set_defaults(func=run)
