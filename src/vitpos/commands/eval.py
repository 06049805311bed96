"""``vitpos eval``: evaluate checkpoints, optionally at several resolutions without fine-tuning.

Prints a table like CPVT's Table 2: one row per checkpoint, one column per input size (and per
metric: a detector's AP, AP50, AP75, APs, APm, APl, in %); rows after the first show their
difference to the first. Writes the results beside each run: ``RUN/eval.json`` (every metric at
every size, with the data, split and checkpoint) and ``RUN/eval.md`` (the table); ``--out FILE``
writes one JSON of every run there instead, and the table beside it (``FILE`` with ``.md``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.catalog import open_data
from ..engine.config import TrainConfig
from ..engine.distributed import pick_device
from ..engine.evaluate import evaluate_resolutions, resolution_table
from ..engine.pipeline import for_evaluation
from ..engine.setup import check_model_fits_data
from ..files import write_atomic, write_json
from ..spec import non_negative_int, positive_int
from ..tasks import TaskKind, task_kind
from ..weights import load_model
from .options import option_type, parse_size_list


def run(args: argparse.Namespace) -> int:
    device = pick_device(args.device)
    rows, task, records = [], None, []
    for path in args.checkpoint:
        model, ckpt = load_model(path, ema=args.ema, device=device)
        cfg = ckpt.model_config
        spec = args.data or ckpt.train_config.get("data")
        if not spec:
            raise ValueError(f"checkpoint {ckpt.path} does not record its data set; pass --data")
        data = open_data(spec, patch_size=cfg.patch_size)
        check_model_fits_data(cfg, data.info, trained_on=ckpt.data, checkpoint=Path(path))
        if task not in (None, data.info.task):
            raise ValueError("all checkpoints in one table must share a task (classification or regression)")
        task = data.info.task
        sizes = args.resolutions or [cfg.image_hw]
        trained = ckpt.train_config
        crop = args.eval_crop or trained.get("eval_crop", TrainConfig.eval_crop)
        if not 0 < crop <= 1:
            raise ValueError(f"--eval-crop {crop} must lie in (0, 1]: the fraction of the resized image kept")
        raw = data.split(args.split)
        split = for_evaluation(raw, crop, trained.get("interpolation", TrainConfig.interpolation))
        results = evaluate_resolutions(
            model, split, sizes, batch_size=args.batch_size, device=device, workers=args.workers
        )
        name = ckpt.path.parent.parent.name if ckpt.path.parent.name == "checkpoints" else ckpt.path.name
        rows.append((name + (" (EMA)" if args.ema else ""), sum(p.numel() for p in model.parameters()), results))
        run_dir = ckpt.path.parent.parent if ckpt.path.parent.name == "checkpoints" else ckpt.path.parent
        split_name = data.test_name if args.split == "test" else args.split
        record = _record(ckpt.path, spec, split_name, args.ema, rows[-1][1], results, task_kind(task))
        records.append((run_dir, record | ({"eval_crop": crop} if split is not raw else {})))  # photographs only
    assert task is not None, "--checkpoint takes one run or more"
    kind = task_kind(task)
    table = resolution_table(rows, task)
    print(table)
    if kind.details:  # every metric, as DETR's evaluation prints COCO's
        names = [kind.headline, *(key for key, _ in kind.details)]
        for name, _, results in rows:
            for (h, w), metrics in results.items():
                shown = (kind.format_metric(k, metrics[k]) if k in metrics else f"{k} -" for k in names)
                print(f"{name} at {h}x{w} on {split_name}: " + "  ".join(shown))
    written = _write(records, table, args.out)
    print("wrote " + ", ".join(map(str, written)))
    return 0


def _record(checkpoint: Path, spec: str, split: str, ema: bool, params: int, results: dict, kind: TaskKind) -> dict:
    """One checkpoint's results for JSON: every metric at every size, their units, and what was evaluated
    (``split`` as the data set names it)."""
    return {
        "task": kind.name,
        "headline": kind.headline,
        "units": dict([(kind.headline, kind.unit), *kind.details]),
        "checkpoint": str(checkpoint),
        "data": spec,
        "split": split,
        "ema": ema,
        "params": params,
        "results": {f"{h}x{w}": metrics for (h, w), metrics in results.items()},
    }


def _write(records: list[tuple[Path, dict]], table: str, out: Path | None) -> list[Path]:
    """``out`` and its ``.md`` table, or ``eval.json`` and ``eval.md`` in every run folder."""
    if out is not None:
        write_atomic(out.with_suffix(".md"), table + "\n")
        return [write_json(out, {"runs": [record for _, record in records]}), out.with_suffix(".md")]
    written = []
    for run_dir, record in records:
        write_atomic(run_dir / "eval.md", table + "\n")
        written += [write_json(run_dir / "eval.json", record), run_dir / "eval.md"]
    return written


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
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write every run's results to this JSON file and the table beside it "
        "(default: RUN/eval.json and RUN/eval.md)",
    )
    p.set_defaults(func=run)
