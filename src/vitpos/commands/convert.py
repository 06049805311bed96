"""``vitpos convert``: turn a released checkpoint into a vitpos checkpoint folder.

Reads timm/DeiT ViTs, the iRPE model zoo, the LaPE authors' ViT, Microsoft's and timm's Swin
and PVT v1 (``.pth`` through ``torch.load(weights_only=True)``, or ``.safetensors``), selects
the released code's options, loads strictly and writes DST/model.safetensors and
DST/config.yaml. Without --model the preset whose parameters match the checkpoint is used.
Then: ``vitpos eval --checkpoint DST --data SPEC`` or ``vitpos train --init DST ...``.
"""

from __future__ import annotations

import argparse

from ..analysis.stages import as_host
from ..files import check_destination
from ..progress import progress_bar
from ..weights import create_model, detect_layout, guess_preset, read_state_dict, read_weights, write_checkpoint
from ..weights.load import layout_of
from ..weights.resize import RESIZES
from ..weights.run_folder import saved_config
from .options import add_model_options, given_options


def run(args: argparse.Namespace) -> int:
    check_destination(args.dst, folder=True, force=args.force)
    overrides = given_options(args, args.option_names)
    name = args.model
    if name is None:
        file = read_weights(args.src, args.entry)
        if saved_config(file.metadata, file.path) is None:  # a released file: the preset its parameters fit
            name = guess_preset(file, layout_of(file))
            print(f"{args.src} fits preset {name} (name another with --model)")
    with progress_bar(2, "convert (load, write)") as bar:
        model = create_model(
            name, checkpoint=args.src, keep_grid=args.keep_grid, entry=args.entry, resize=args.resize, **overrides
        )
        bar.update()
        layout = detect_layout(read_state_dict(args.src, args.entry), args.src).name
        write_checkpoint(model, args.dst, source=str(args.src), layout=layout)
        bar.update()
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.src} ({layout} layout) -> {args.dst}: {as_host(model).cfg.arch} model, {params:,} parameters")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a released checkpoint (timm/DeiT, iRPE, LaPE, Swin, PVT) into a vitpos checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("src", help="the released checkpoint (.pth or .safetensors)")
    p.add_argument("dst", help="folder to write model.safetensors and config.yaml into")
    p.add_argument("--force", action="store_true", help="write into DST even if it holds files (they are replaced)")
    p.add_argument("--model", metavar="NAME", help="preset to load into (default: the one the checkpoint fits)")
    p.add_argument(
        "--entry", metavar="KEY", help="dict entry holding the weights (default: model, state_dict or model_ema)"
    )
    p.add_argument(
        "--keep-grid",
        action="store_true",
        help="build the model at the checkpoint's grid and window instead of resampling to the preset's",
    )
    p.add_argument(
        "--resize",
        choices=RESIZES,
        help="how tables stored for another size are fitted: timm (antialiased bicubic, geometric Swin tables) or "
        "model (the model's run-time resampling); default: timm for timm/DeiT, iRPE, LaPE and Swin files",
    )
    names = add_model_options(p, "override fields of the preset (num_classes re-initialises the classifier)")
    p.set_defaults(func=run, option_names=names["model"] + names["slots"])
