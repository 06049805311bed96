"""``vitpos attention``: attention maps per stage, block and head, and how local they are (CPVT Fig. 5).

On a pyramid host every stage has its own grid: one pair of figures per stage. Under PVT's
spatial reduction the keys lie on the reduced grid; under Swin's windows a query attends only
within its window.
"""

from __future__ import annotations

import argparse

import torch

from ..analysis.attention import (
    AttentionMap,
    attention_maps,
    mean_attention_distance,
    patch_attention,
    query_maps,
    uniform_attention_distance,
)
from ..analysis.plots import save_heatmap_pages
from ..analysis.similarity import default_references, parse_references
from ..analysis.stages import stage_grid, stage_indices, stage_name
from ..files import write_json
from .model_args import (
    add_input_arguments,
    add_model_arguments,
    add_output_argument,
    add_stage_argument,
    build_host,
    figure_path,
    sample_images,
)


def _figures(args: argparse.Namespace, model, stage: int, maps: list[AttentionMap]) -> list:
    """The attention matrices (first image) and query maps (mean over heads and images) of one stage's blocks."""
    grid, prefix, stride = maps[0].grid, maps[0].num_prefix_tokens, maps[0].key_stride
    queries = parse_references(args.queries, grid) if args.queries else default_references(grid)
    blocks = [f"block {m.block}" for m in maps]
    name = stage_name(model, stage, f"{grid[0]}x{grid[1]} grid")
    # the first image, as CPVT Fig. 5 shows one input sequence
    matrices = torch.stack([patch_attention(m.weights[0], prefix) for m in maps])  # blocks, heads, N, M
    paths = save_heatmap_pages(
        figure_path(args.out, "attention_matrix", model, stage),
        matrices,
        row_labels=blocks,
        col_labels=[f"head {h}" for h in range(matrices.shape[1])],
        title=f"attention weights of patch tokens (first image), {name}",
        vmin=0.0,
        xlabel="key token",
        ylabel="query token",
        colorbar_label="attention weight",
    )
    where = torch.stack(
        [query_maps(m.weights.mean(dim=(0, 1)), grid, queries, prefix, stride) for m in maps]
    )  # blocks, Q, h, w
    paths += save_heatmap_pages(
        figure_path(args.out, "attention_queries", model, stage),
        where,
        row_labels=blocks,
        col_labels=[f"query {r},{c}" for r, c in queries],
        markers=[(r // stride, c // stride) for r, c in queries],
        title=f"where each query (star) attends, mean over heads and images, {name}"
        + (f" (keys reduced {stride}x{stride})" if stride > 1 else ""),
        vmin=0.0,
        colorbar_label="attention weight",
    )
    return paths


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    images = sample_images(model, args)
    chosen = stage_indices(model, args.stage)
    everything = [m for m in attention_maps(model, images) if m.stage in chosen]
    print("mean attention distance in cells of the stage's grid")
    stages, paths = [], []
    for stage in chosen:
        maps = [m for m in everything if m.stage == stage]
        grid, stride = stage_grid(model, (images.shape[-2], images.shape[-1]), stage), maps[0].key_stride
        uniform = uniform_attention_distance(grid, stride)
        distances = [mean_attention_distance(m.weights, grid, m.num_prefix_tokens, m.key_stride).tolist() for m in maps]
        print(f"{stage_name(model, stage, f'{grid[0]}x{grid[1]} grid')} (uniform attention: {uniform:.2f})")
        for m, per_head in zip(maps, distances, strict=True):
            print(f"  block {m.block:2d}  " + "  ".join(f"head {h}: {d:5.2f}" for h, d in enumerate(per_head)))
        paths += _figures(args, model, stage, maps)
        stages.append(
            {
                "stage": stage,
                "grid": list(grid),
                "key_stride": stride,
                "uniform_distance": uniform,
                "mean_attention_distance": distances,
            }
        )
    write_json(args.out / "attention.json", {"stages": stages})
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="attention maps per stage, block and head", description=__doc__)
    add_model_arguments(p)
    add_input_arguments(p)
    add_stage_argument(p, "all", "blocks' attention")
    p.add_argument(
        "--queries", metavar="R,C;R,C", help="query cells to map (default: a corner, an edge cell, the centre)"
    )
    add_output_argument(p, "attention")
    p.set_defaults(func=run)
