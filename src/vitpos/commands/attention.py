"""``vitpos attention``: attention maps per stage, block and head, and how local they are (CPVT Fig. 5).

On a pyramid host every stage has its own grid: one pair of figures per stage. Under PVT's
spatial reduction the keys lie on the reduced grid; under Swin's windows a query attends only
within its window.
"""

from __future__ import annotations

import argparse

import torch

from ..analysis.attention import uniform_attention_distance
from ..analysis.attention_summary import AttentionSummary, attention_summaries
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
    claim_output,
    figure_path,
    model_label,
    sample_images,
)

HEADS_PER_ROW = 6
"""Heads side by side in the matrix figure; more wrap onto further rows (Swin's 24 heads: 4 rows)."""


def _head_rows(summaries: list[AttentionSummary]) -> tuple[torch.Tensor, list[str], list[list[str]]]:
    """The matrices (rows, HEADS_PER_ROW, n, m), NaN-padded, with a label per row and a title per panel."""
    heads = summaries[0].matrix.shape[0]
    per_row = min(heads, HEADS_PER_ROW)
    rows, labels, titles = [], [], []
    for m in summaries:
        for first in range(0, heads, per_row):
            row = m.matrix[first : first + per_row]
            padding = row.new_full((per_row - row.shape[0], *row.shape[1:]), float("nan"))
            rows.append(torch.cat([row, padding]))
            labels.append(f"block {m.block}")
            titles.append([f"head {h}" for h in range(first, min(first + per_row, heads))])
    return torch.stack(rows), labels, titles


def _figures(args: argparse.Namespace, model, stage: int, summaries: list[AttentionSummary], queries) -> list:
    """The attention matrices (first image) and query maps (mean over heads and images) of one stage's blocks."""
    grid, stride = summaries[0].grid, summaries[0].key_stride
    name = stage_name(model, stage, f"{grid[0]}x{grid[1]} grid")
    tokens = summaries[0].matrix_tokens
    pooled = tuple(summaries[0].matrix.shape[-2:]) != tokens
    matrices, labels, titles = _head_rows(summaries)
    model_name = model_label(args)
    # the colour scale spans the weights' own range, not 0 to max: near-uniform attention (every weight close
    # to 1 / keys) would otherwise be one colour
    scale = "attention weight\n(colours: min to max)"
    # the first image, as CPVT Fig. 5 shows one input sequence
    paths = save_heatmap_pages(
        figure_path(args.out, "attention_matrix", model, stage),
        matrices,
        row_labels=labels,
        panel_titles=titles,
        title=f"{model_name}: attention weights of patch tokens (first image), {name}"
        + (f": {tokens[0]} queries x {tokens[1]} keys, mean over blocks of tokens" if pooled else ""),
        xlabel="key token",
        ylabel="query token",
        colorbar_label=scale,
        extent=tokens,
    )
    paths += save_heatmap_pages(
        figure_path(args.out, "attention_queries", model, stage),
        torch.stack([m.queries for m in summaries]),
        row_labels=[f"block {m.block}" for m in summaries],
        col_labels=[f"query {r},{c}" for r, c in queries(grid)],
        markers=[(r // stride, c // stride) for r, c in queries(grid)],
        title=f"{model_name}: where each query (star) attends, mean over heads and images, {name}"
        + (f" (keys reduced {stride}x{stride})" if stride > 1 else ""),
        colorbar_label=scale,
    )
    return paths


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    images = sample_images(model, args)
    chosen = stage_indices(model, args.stage)

    def queries(grid):
        return parse_references(args.queries, grid) if args.queries else default_references(grid)

    everything = attention_summaries(model, images, chosen, queries)
    print("mean attention distance in cells of the stage's grid")
    stages, paths = [], []
    for stage in chosen:
        summaries = [m for m in everything if m.stage == stage]
        grid, stride = stage_grid(model, (images.shape[-2], images.shape[-1]), stage), summaries[0].key_stride
        uniform = uniform_attention_distance(grid, stride)
        distances = [m.distance.tolist() for m in summaries]
        print(f"{stage_name(model, stage, f'{grid[0]}x{grid[1]} grid')} (uniform attention: {uniform:.2f})")
        for m, per_head in zip(summaries, distances, strict=True):
            print(f"  block {m.block:2d}  " + "  ".join(f"head {h}: {d:5.2f}" for h, d in enumerate(per_head)))
        paths += _figures(args, model, stage, summaries, queries)
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
