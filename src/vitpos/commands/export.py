"""``vitpos export``: one graph for every image size in a range, as a ``torch.export`` program or ONNX.

    vitpos export --model deit_tiny_patch16_224 --format pt2 --min-size 64 --max-size 1024 deit.pt2
    vitpos export --checkpoint runs/cifar --format onnx --min-size 32 --max-size 256 cifar.onnx
    vitpos export --model deit_small_patch16_224 --pretrained deit_small.pt2

Writes OUT and, beside it, OUT's name with ``.yaml`` added (``deit.pt2.yaml``): the resolved model config, the
accepted sizes and the data config (input size, mean and std, resize, crop and interpolation,
class names: a checkpoint's own, else the released ImageNet models'). Load both with
``vitpos.deploy.load_deployed(OUT)``, which checks each input's size as the eager model does
before running the graph, and whose ``predict`` prepares photographs as the data config says.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..deploy import FORMATS, export_model, metadata_path
from ..ownership import check_outputs
from ..progress import progress_bar
from ..weights.build import saved_data_config
from .model_args import add_model_arguments, build_model


def run(args: argparse.Namespace) -> int:
    check_outputs((args.out, metadata_path(args.out)), "export", args.force)
    with progress_bar(2, f"{args.format} export (build, export)") as bar:
        model = build_model(args)
        bar.update()
        prepared = saved_data_config(args.checkpoint) if args.checkpoint else None
        meta = export_model(
            model, args.out, fmt=args.format, min_size=args.min_size, max_size=args.max_size, data_config=prepared
        )
        bar.update()
    print(f"wrote {args.out} ({args.format}, image sides {args.min_size}..{args.max_size}) and {meta}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a model for any image size in a range (torch.export .pt2 or ONNX)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_arguments(p, default_model="deit_tiny_patch16_224")
    p.add_argument(
        "--format", choices=FORMATS, default="pt2", help="pt2: a torch.export program; onnx: an ONNX file (default pt2)"
    )
    p.add_argument("--min-size", type=int, default=64, help="smallest image side in pixels (default 64)")
    p.add_argument("--max-size", type=int, default=1024, help="largest image side in pixels (default 1024)")
    p.add_argument(
        "--force", action="store_true", help="replace OUT and its .yaml if an earlier vitpos export wrote them"
    )
    p.add_argument("out", type=Path, metavar="OUT", help="the file to write, e.g. model.pt2 or model.onnx")
    p.set_defaults(func=run)
