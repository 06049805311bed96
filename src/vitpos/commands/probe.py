"""``vitpos probe``: linear probes for relative location in a model's position tables (thesis §4.1)."""

from __future__ import annotations

import argparse

from ..analysis.plots import save_bars
from ..analysis.probes import MAX_PAIRS, REGRESSIONS, SPLITS, ProbeResult, probe_table
from ..analysis.stages import native_grid, stage_name
from ..analysis.tables import layer_position_encodings
from ..files import write_json
from ..spec import positive_int
from .model_args import (
    add_model_arguments,
    add_output_argument,
    add_stage_argument,
    build_host,
    claim_output,
    model_label,
)
from .options import option_type
from .stage_runs import each_stage


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    folds = f"{args.folds} folds" if args.folds else "10 folds (N // 3 on a grid of N < 30 cells)"
    print(
        f"{'table':20s} {'grid':>6s} {'left/right':>10s} {'up/down':>8s} {'(dx,dy) R²':>10s} {'pairs':>19s}   "
        f"{folds} over {args.split}"
    )
    results: dict[str, ProbeResult] = {}
    records = {}

    def probe_stage(stage: int) -> None:
        grid = native_grid(model, stage)
        for name, table in layer_position_encodings(model, grid, stage).items():
            label = stage_name(model, stage, name)
            result = probe_table(
                table, grid, folds=args.folds, split=args.split, regression=args.regression, seed=args.seed
            )
            results[label] = result
            records[label] = result.to_dict() | {"grid": list(grid)}
            print(
                f"{label:20s} {grid[0]:>3d}x{grid[1]:<2d} "
                f"{result.left_right:10.3f} {result.up_down:8.3f} {result.distance_r2:10.3f} "
                f"{result.pairs:>9,d}/{result.all_pairs:<9,d}"
            )

    each_stage(model, args.stage, "probing", probe_stage)
    if any(r.pairs < r.all_pairs for r in results.values()):
        print(f"a table with more pairs of cells than {MAX_PAIRS:,d} is probed on that many, drawn at random (--seed)")
    figure = save_bars(
        args.out / "probe.png",
        list(results),
        {
            "left/right accuracy": [r.left_right for r in results.values()],
            "up/down accuracy": [r.up_down for r in results.values()],
            "(dx, dy) R²": [r.distance_r2 for r in results.values()],
        },
        xlabel="position table",
        ylabel="accuracy, or R²",
        title=f"linear probes for relative location: {model_label(args)}, folds over {args.split}",
        ylim=(max(-1.0, min(0.0, *(r.distance_r2 for r in results.values()))), 1.02),
        lines={"chance accuracy (0.5)": 0.5, "R² of the mean (0)": 0.0},
    )
    print(f"wrote {write_json(args.out / 'probe.json', records)} and {figure}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="probe position tables for relative location", description=__doc__)
    add_model_arguments(p)
    add_stage_argument(p, "-1", "absolute table and per-block encodings")
    p.add_argument(
        "--folds",
        type=option_type(positive_int),
        help="cross-validation folds (default 10, as the thesis, or fewer on grids under 30 cells)",
    )
    p.add_argument("--split", choices=SPLITS, default="cells", help="what the folds hold out (default cells)")
    p.add_argument(
        "--regression",
        choices=REGRESSIONS,
        default="ridge",
        help="offset probe: ridge with a cross-validated penalty (default) or plain least squares",
    )
    add_output_argument(p, "probe")
    p.set_defaults(func=run)
