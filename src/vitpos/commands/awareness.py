"""``vitpos awareness``: can a linear probe read each token's own grid cell from its features?"""

from __future__ import annotations

import argparse

from ..analysis.awareness import position_awareness
from ..analysis.plots import save_curves
from ..analysis.stages import stage_blocks, stage_count, stage_grid, stage_index, stage_name
from ..files import write_json
from ..spec import positive_int
from .model_args import (
    add_input_arguments,
    add_model_arguments,
    add_output_argument,
    build_host,
    claim_output,
    model_label,
    sample_images,
)
from .options import option_type


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    images = sample_images(model, args)
    stage = stage_index(model, args.stage)
    last = stage == stage_count(model) - 1
    grid = stage_grid(model, (images.shape[-2], images.shape[-1]), stage)
    print(f"{stage_name(model, stage, f'{grid[0]}x{grid[1]} grid')}")
    print(f"{'features':10s} {'R²':>7s} {'cell acc':>8s}")
    results = {}
    # the last stage's output after the final norm; an earlier stage's output is its last block's
    for block in [*range(len(stage_blocks(model, stage))), *([None] if last else [])]:
        name = "final" if block is None else f"block {block}"
        result = position_awareness(model, images, block=block, stage=stage, folds=args.folds)
        results[name] = result.to_dict()
        print(f"{name:10s} {result.r2:7.3f} {result.cell_accuracy:8.3f}")
    names = list(results)
    where = model_label(args) + (f", {stage_name(model, stage, '')}".rstrip() if stage_count(model) > 1 else "")
    figure = save_curves(
        args.out / "awareness.png",
        list(range(len(names))),
        {
            label: ([r[key] for r in results.values()], [0.0] * len(names))
            for key, label in (("cell_accuracy", "cell accuracy"), ("r2", "(column, row) R²"))
        },
        xlabel="features after block (final: after the last norm)",
        ylabel="probe score",
        xticklabels=[n.replace("block ", "") for n in names],
        title=f"can a linear probe read each token's own cell? {where}",
        floor=-1.0,
    )
    print(f"wrote {write_json(args.out / 'awareness.json', results)} and {figure}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("awareness", help="probe token features for their own position", description=__doc__)
    add_model_arguments(p)
    add_input_arguments(p)
    p.add_argument(
        "--stage", type=int, default=-1, help="the stage whose tokens to probe: 0 = first, -1 = last (default)"
    )
    p.add_argument(
        "--folds", type=option_type(positive_int), default=5, help="cross-validation folds over images (default 5)"
    )
    add_output_argument(p, "awareness")
    p.set_defaults(func=run)
