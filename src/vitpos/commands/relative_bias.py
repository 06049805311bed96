"""``vitpos relative-bias``: the logits a relative encoding adds around reference patches (iRPE Fig. 5)."""

from __future__ import annotations

import argparse

from ..analysis.plots import save_heatmaps
from ..errors import ConfigError
from ..analysis.relative_maps import bias_maps, reference_lattice, relative_attention_layers, relative_logit_bias
from ..files import write_json
from ..spec import non_negative_int, positive_int
from .model_args import add_input_arguments, add_model_arguments, add_output_argument, build_model, sample_images
from .options import option_type


def run(args: argparse.Namespace) -> int:
    model = build_model(args)
    images = sample_images(model, args)
    grid = model.grid_for(tuple(images.shape[-2:]))
    refs = reference_lattice(grid, args.per_side)
    rows = sorted({r for r, _ in refs})
    cols = sorted({c for _, c in refs})
    blocks = range(len(relative_attention_layers(model))) if args.block is None else [args.block]
    heads = relative_attention_layers(model)[0].num_heads
    if args.attention_head is not None and args.attention_head >= heads:
        raise ConfigError(f"--attention-head {args.attention_head} does not exist: the model has {heads} heads; use 0 to {heads - 1}")
    summary = {}
    for block in blocks:
        bias = relative_logit_bias(model, block, images)
        maps = bias_maps(bias, grid, refs, model.num_prefix_tokens)  # heads, R, H, W
        shared = maps.shape[0] == 1  # one table for every head
        maps = maps.mean(0) if args.attention_head is None else maps[0 if shared else args.attention_head]
        mosaic = maps.reshape(len(rows), len(cols), *grid)  # references laid out where they sit
        path = save_heatmaps(
            args.out / f"relative_bias_block{block}.png", mosaic, markers=[[(r, c) for c in cols] for r in rows],
            row_labels=[f"row {r}" for r in rows], col_labels=[f"col {c}" for c in cols],
            title=f"relative logit bias, block {block}, " + ("mean over heads" if args.attention_head is None else f"head {args.attention_head}"),
            xlabel="key column", ylabel="key row", colorbar_label="logit added to query (star) -> key",
        )
        summary[f"block {block}"] = {"min": float(maps.min()), "max": float(maps.max())}
        print(f"block {block}: bias in [{maps.min():.3f}, {maps.max():.3f}]  wrote {path}")
    write_json(args.out / "relative_bias.json", {"grid": list(grid), "references": refs, "blocks": summary})
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("relative-bias", help="maps of the logits a relative encoding adds", description=__doc__)
    add_model_arguments(p, default_model="deit_tiny_patch16_224_ctx_product_50_shared_k")
    add_input_arguments(p)
    p.add_argument("--block", type=int, help="one block (default: every block with a relative encoding)")
    p.add_argument("--attention-head", type=option_type(non_negative_int), help="one attention head (default: the mean over heads)")
    p.add_argument("--per-side", type=option_type(positive_int), default=5, help="reference cells per side (default 5, as iRPE Fig. 5)")
    add_output_argument(p, "relative-bias")
    p.set_defaults(func=run)
