"""``vitpos equivariance``: how far features and logits are from translation equivariance (CPVT §3).

Shifts count tokens of the last stage (patches of a plain ViT, the total stride of a pyramid);
a pyramid also reports the error of every stage's map.
"""

from __future__ import annotations

import argparse
import math

from ..analysis.equivariance import MODES, EquivarianceResult, equivariance_error, equivariance_sweep
from ..analysis.plots import save_curve_panels
from ..analysis.stages import as_host, stage_grid
from ..files import write_json
from ..spec import non_negative_int
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


def parse_shift(text: str) -> tuple[int, int]:
    """``"dy,dx"`` in patches."""
    try:
        dy, dx = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shift {text!r} must look like 'rows,cols', e.g. '1,2'") from None
    return dy, dx


def sweep_panels(sweep: dict[str, list[EquivarianceResult | None]], stages: int) -> dict[str, dict[str, list[float]]]:
    """The figure's panels: every stage's feature error (one panel each), then the logit change;
    one curve per shift direction, NaN where a shift does not apply."""
    panels: dict[str, dict[str, list[float]]] = {}
    for s in range(stages):
        name = "features" if stages == 1 else f"stage {s} features"
        panels[name] = {d: [math.nan if r is None else r.stage_errors[s] for r in rs] for d, rs in sweep.items()}
    panels["logits"] = {
        d: [math.nan if r is None or r.logit_change is None else r.logit_change for r in rs] for d, rs in sweep.items()
    }
    return panels


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    images = sample_images(model, args)
    result = equivariance_error(model, images, args.shift, mode=args.mode, margin=args.margin)
    stride = as_host(model).cfg.stride
    print(
        f"shift {args.shift} last-stage tokens of {stride} pixels ({args.mode}), {result.interior_cells} interior cells"
    )
    print(f"feature error  {result.feature_error:.3e}   (0 = equivariant)")
    if len(result.stage_errors) > 1:
        print("per stage      " + "  ".join(f"{s}: {e:.3e}" for s, e in enumerate(result.stage_errors)))
    if result.logit_change is not None:
        print(f"logit change   {result.logit_change:.3e}   (0 = invariant; expect 0 only with a GAP head)")
    grid = stage_grid(model, (images.shape[-2], images.shape[-1]))
    steps = min(max(4, *map(abs, args.shift)), min(grid) - 1)
    sweep = equivariance_sweep(model, images, steps, mode=args.mode, margin=args.margin)
    figure = save_curve_panels(
        args.out / "equivariance.png",
        list(range(1, steps + 1)),
        sweep_panels(sweep, len(result.stage_errors)),
        xlabel=f"shift (tokens of {stride} px)",
        ylabel="relative error of the features (0 = equivariant)",
        title=f"{args.mode} shifts on the {grid[0]}x{grid[1]} last-stage grid: {model_label(args)}",
        xticklabels=[str(k) for k in range(1, steps + 1)],
        panel_ylabels={"logits": "relative change of the logits (0 = invariant)"},
        from_zero=True,
    )
    sweep_json = {d: [None if r is None else r.to_dict() for r in rs] for d, rs in sweep.items()}
    path = write_json(
        args.out / "equivariance.json", {**result.to_dict(), "shift": list(args.shift), "sweep": sweep_json}
    )
    print(f"wrote {path} and {figure}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("equivariance", help="translation equivariance of features and logits", description=__doc__)
    add_model_arguments(p)
    add_input_arguments(p)
    p.add_argument("--shift", type=parse_shift, default=(1, 1), help="rows,cols in last-stage tokens (default 1,1)")
    p.add_argument("--mode", choices=MODES, default="roll", help="cyclic shift, or shift with zero fill (default roll)")
    p.add_argument(
        "--margin",
        type=option_type(non_negative_int),
        default=1,
        help="border cells left out of the feature error (default 1)",
    )
    add_output_argument(p, "equivariance")
    p.set_defaults(func=run)
