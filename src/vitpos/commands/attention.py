"""``vitpos attention``: attention maps per block and head, and how local they are (CPVT Fig. 5)."""

from __future__ import annotations

import argparse

import torch

from ..analysis.attention import attention_maps, mean_attention_distance, patch_attention, query_maps, uniform_attention_distance
from ..analysis.plots import save_heatmap_pages
from ..analysis.similarity import default_references, parse_references
from ..files import write_json
from .model_args import add_input_arguments, add_model_arguments, add_output_argument, build_model, sample_images


def run(args: argparse.Namespace) -> int:
    model = build_model(args)
    images = sample_images(model, args)
    grid = model.grid_for(tuple(images.shape[-2:]))
    queries = parse_references(args.queries, grid) if args.queries else default_references(grid)
    prefix = model.num_prefix_tokens
    weights = attention_maps(model, images)
    distances = [mean_attention_distance(w, grid, prefix).tolist() for w in weights]
    print(f"mean attention distance in patches (uniform attention: {uniform_attention_distance(grid):.2f})")
    for index, per_head in enumerate(distances):
        print(f"block {index:2d}  " + "  ".join(f"head {h}: {d:5.2f}" for h, d in enumerate(per_head)))
    # the first image, as CPVT Fig. 5 shows one input sequence
    matrices = torch.stack([patch_attention(w[0], prefix) for w in weights])  # blocks, heads, N, N
    heads = matrices.shape[1]
    blocks = [f"block {i}" for i in range(len(weights))]
    matrix_paths = save_heatmap_pages(
        args.out / "attention_matrix.png", matrices, row_labels=blocks, col_labels=[f"head {h}" for h in range(heads)],
        title="attention weights of patch tokens (first image)", vmin=0.0,
        xlabel="key token", ylabel="query token", colorbar_label="attention weight",
    )
    maps = torch.stack([query_maps(w.mean(dim=(0, 1)), grid, queries, prefix) for w in weights])  # blocks, Q, H, W
    query_paths = save_heatmap_pages(
        args.out / "attention_queries.png", maps, row_labels=blocks, col_labels=[f"query {r},{c}" for r, c in queries],
        markers=queries, title="where each query (star) attends, mean over heads and images", vmin=0.0,
        colorbar_label="attention weight",
    )
    write_json(args.out / "attention.json", {"grid": list(grid), "mean_attention_distance": distances})
    print("wrote " + ", ".join(str(p) for p in [*matrix_paths, *query_paths]))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="attention maps per block and head", description=__doc__)
    add_model_arguments(p)
    add_input_arguments(p)
    p.add_argument("--queries", metavar="R,C;R,C", help="query cells to map (default: a corner, an edge cell, the centre)")
    add_output_argument(p, "attention")
    p.set_defaults(func=run)
