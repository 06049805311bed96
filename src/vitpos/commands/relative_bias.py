"""``vitpos relative-bias``: the logits a relative encoding adds around reference patches (iRPE Fig. 5)."""

from __future__ import annotations

import argparse

from torch import nn

from ..analysis.plots import save_heatmaps
from ..analysis.relative_maps import (
    NoRelativeEncodingError,
    RelativeLayer,
    bias_maps,
    reference_lattice,
    relative_attention_layers,
    relative_logit_bias,
)
from ..analysis.stages import as_host, stage_count, stage_indices, stage_name
from ..errors import ConfigError
from ..files import write_json
from ..progress import progress
from ..spec import non_negative_int, positive_int
from .model_args import (
    add_input_arguments,
    add_model_arguments,
    add_output_argument,
    add_stage_argument,
    build_host,
    claim_output,
    model_label,
    sample_images,
)
from .options import option_type


def _layers(model: nn.Module, args: argparse.Namespace) -> list[tuple[int, RelativeLayer]]:
    """(index among the relative layers, layer) of the chosen stage(s) and block."""
    try:
        layers = list(enumerate(relative_attention_layers(model)))
    except NoRelativeEncodingError:
        relative = as_host(model).cfg.position.relative
        raise ConfigError(
            f"this model has no relative encoding (relative={relative!r}); analyse a trained run with one "
            "(--checkpoint RUN) or build one: --relative irpe:product:ctx:k (or swin, ...)"
        ) from None
    stages = stage_indices(model, args.stage)
    chosen = [(i, layer) for i, layer in layers if layer.stage in stages and args.block in (None, layer.block)]
    if not chosen:
        where = f"block {args.block}" + (f" of stage {args.stage}" if args.stage is not None else "")
        have = ", ".join(stage_name(model, layer.stage, f"block {layer.block}") for _, layer in layers)
        raise ConfigError(
            f"{where} does not exist; the model has {len(layers)} layers with a relative encoding: {have}"
        )
    return chosen


def run(args: argparse.Namespace) -> int:
    model = build_host(args)
    claim_output(args)
    images = sample_images(model, args)
    summary = {}
    untrained = []
    for index, layer in progress(_layers(model, args), "relative-bias maps", unit="block"):
        heads = layer.attn.num_heads
        if args.attention_head is not None and args.attention_head >= heads:
            where = f" in stage {layer.stage}" if stage_count(model) > 1 else ""
            raise ConfigError(
                f"--attention-head {args.attention_head} does not exist: the model has {heads} heads{where}; "
                f"use 0 to {heads - 1}"
            )
        grid, prefix = layer.view(model, (images.shape[-2], images.shape[-1]))
        refs = reference_lattice(grid, args.per_side)
        rows, cols = sorted({r for r, _ in refs}), sorted({c for _, c in refs})
        bias = relative_logit_bias(model, index, images)
        maps = bias_maps(bias, grid, refs, prefix)  # heads, R, H, W
        shared = maps.shape[0] == 1  # one table for every head
        maps = maps.mean(0) if args.attention_head is None else maps[0 if shared else args.attention_head]
        mosaic = maps.reshape(len(rows), len(cols), *grid)  # references laid out where they sit
        name = stage_name(model, layer.stage, f"block {layer.block}")
        stem = (
            f"relative_bias_block{layer.block}"
            if stage_count(model) == 1
            else f"relative_bias_stage{layer.stage}_block{layer.block}"
        )
        path = save_heatmaps(
            args.out / f"{stem}.png",
            mosaic,
            markers=[[(r, c) for c in cols] for r in rows],
            row_labels=[f"row {r}" for r in rows],
            col_labels=[f"col {c}" for c in cols],
            title=f"relative logit bias: {model_label(args)}, {name} "
            f"({grid[0]}x{grid[1]} {'window' if layer.windowed else 'grid'}), "
            + ("mean over heads" if args.attention_head is None else f"head {args.attention_head}"),
            xlabel="key column",
            ylabel="key row",
            colorbar_label="logit added to query (star) -> key",
            diverging=True,
        )
        summary[name] = {"grid": list(grid), "references": refs, "min": float(maps.min()), "max": float(maps.max())}
        print(f"{name}: bias in [{maps.min():.3f}, {maps.max():.3f}] on a {grid[0]}x{grid[1]} grid  wrote {path}")
        if not bool(bias.any()):
            untrained.append(name)
    if untrained:
        print(
            f"the relative tables of {', '.join(untrained)} are all zero (iRPE's start at zero, so this model is "
            "untrained there) and add nothing yet; analyse a trained run: --checkpoint RUN"
        )
    write_json(args.out / "relative_bias.json", {"blocks": summary})
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("relative-bias", help="maps of the logits a relative encoding adds", description=__doc__)
    add_model_arguments(p)
    add_input_arguments(p)
    add_stage_argument(p, "all", "blocks' relative encodings")
    p.add_argument(
        "--block", type=int, help="one block of each chosen stage (default: every block with a relative encoding)"
    )
    p.add_argument(
        "--attention-head", type=option_type(non_negative_int), help="one attention head (default: the mean over heads)"
    )
    p.add_argument(
        "--per-side",
        type=option_type(positive_int),
        default=5,
        help="reference cells per side (default 5, as iRPE Fig. 5)",
    )
    add_output_argument(p, "relative-bias")
    p.set_defaults(func=run)
