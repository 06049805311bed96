"""``vitpos eval``: evaluate checkpoints, optionally at several resolutions without fine-tuning.

Prints a table like CPVT's Table 2: one row per checkpoint, one column per input size;
rows after the first show their difference to the first.
"""

from __future__ import annotations

import argparse

from ..data.catalog import open_data
from ..engine.config import TrainConfig
from ..engine.distributed import pick_device
from ..engine.evaluate import evaluate_resolutions, resolution_table
from ..engine.pipeline import for_evaluation
from ..engine.setup import check_model_fits_data
from ..spec import non_negative_int, positive_int
from ..tasks.detection.coco_eval import coco_summary
from ..weights import load_model
from .options import option_type, parse_size_list


def run(args: argparse.Namespace) -> int:
    device = pick_device(args.device)
    rows, task = [], None
    for path in args.checkpoint:
        model, ckpt = load_model(path, ema=args.ema, device=device)
        cfg = ckpt.model_config
        spec = args.data or ckpt.train_config.get("data")
        if not spec:
            raise ValueError(f"checkpoint {ckpt.path} does not record its data set; pass --data")
        data = open_data(spec, patch_size=cfg.patch_size)
        check_model_fits_data(cfg, data.info, trained_on=ckpt.data)
        if task not in (None, data.info.task):
            raise ValueError("all checkpoints in one table must share a task (classification or regression)")
        task = data.info.task
        sizes = args.resolutions or [cfg.image_hw]
        trained = ckpt.train_config
        crop = args.eval_crop or trained.get("eval_crop", TrainConfig.eval_crop)
        if not 0 < crop <= 1:
            raise ValueError(f"--eval-crop {crop} must lie in (0, 1]: the fraction of the resized image kept")
        split = for_evaluation(data.split(args.split), crop, trained.get("interpolation", TrainConfig.interpolation))
        results = evaluate_resolutions(
            model, split, sizes, batch_size=args.batch_size, device=device, workers=args.workers
        )
        name = ckpt.path.parent.parent.name if ckpt.path.parent.name == "checkpoints" else ckpt.path.name
        rows.append((name + (" (EMA)" if args.ema else ""), sum(p.numel() for p in model.parameters()), results))
    assert task is not None, "--checkpoint takes one run or more"
    print(resolution_table(rows, task))
    if task == "detection":  # DETR's evaluation: every COCO number
        for name, _, results in rows:
            print("\n".join(f"{name} at {h}x{w}: {coco_summary(m)}" for (h, w), m in results.items()))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate checkpoints, optionally at several resolutions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--checkpoint",
        nargs="+",
        required=True,
        metavar="RUN",
        help="run folders (their newest checkpoint) or checkpoint folders; one table row each",
    )
    p.add_argument(
        "--data", metavar="SPEC", help="data set to evaluate on (default: the one each checkpoint was trained on)"
    )
    p.add_argument(
        "--split", default="test", choices=("train", "val", "test"), help="split to evaluate (default: test)"
    )
    p.add_argument(
        "--resolutions",
        type=parse_size_list,
        metavar="SIZES",
        help="input sizes, e.g. 32,48,64 or 32x48; default: the training size",
    )
    p.add_argument(
        "--eval-crop",
        type=float,
        metavar="X",
        help="photographs from files: resize the shorter side to size / X, then centre-crop "
        "(default: the run's eval_crop, 0.875 as DeiT)",
    )
    p.add_argument("--batch-size", type=option_type(positive_int), default=256, help="images per batch (default: 256)")
    p.add_argument("--ema", action="store_true", help="use the EMA weights")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: auto)")
    p.add_argument(
        "--workers", type=option_type(non_negative_int), default=0, help="data-loading worker processes (default: 0)"
    )
    p.set_defaults(func=run)
