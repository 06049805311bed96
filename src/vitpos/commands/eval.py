"""``vitpos eval``: evaluate checkpoints, optionally at several resolutions without fine-tuning.

Prints a line naming the metric, its unit, the split and the data, then a table like CPVT's
Table 2: one row per checkpoint, one column per input size (and per metric: a detector's AP, AP50,
AP75, APs, APm, APl, in %); rows after the first show their difference to the first. Writes the
results into each folder it evaluated (a run folder, or a converted one): ``eval-SPLIT.json``
(every metric at every size, which are percentages, the data, split and checkpoint) and
``eval-SPLIT.md`` (the line and the table). The name holds everything that changes the results:
``-ema`` for ``--ema``, ``-atSIZES`` for ``--resolutions`` other than the training size,
``-cropX`` for an ``--eval-crop`` other than the run's, and ``-data-HASH`` for a ``--data`` other
than the one trained on, so two evaluations with other options never share a file; the same
evaluation again refuses to replace its earlier file without ``--force``. ``--out FILE`` writes one
JSON of every run there instead, and the table beside it (``FILE`` with ``.md``).
Released weights (``--model NAME --pretrained``, or a released file, its URL or a preset's name as
``--checkpoint``) have no folder: their results are written only with ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from ..data.catalog import anchored_spec, open_data
from ..engine.distributed import pick_device
from ..engine.evaluate import evaluate_resolutions, resolution_table
from ..engine.pipeline import for_evaluation
from ..engine.setup import check_model_fits_data
from ..files import write_atomic, write_json
from ..ownership import check_outputs
from ..spec import non_negative_int, positive_int
from ..tasks import TaskKind, task_kind
from ..weights import load_model
from ..weights.build import is_released
from ..weights.run_folder import CHECKPOINTS
from .options import option_type, parse_size_list


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        if args.out.suffix == ".md":
            raise ValueError(f"--out {args.out}: the table is written beside FILE as FILE.md; name a .json file")
        check_outputs((args.out, args.out.with_suffix(".md")), "eval", args.force)
    device = pick_device(args.device)
    rows, task = [], None
    records: list[tuple[Path | None, dict]] = []
    splits: set[str] = set()
    specs: set[str] = set()
    if args.pretrained != bool(args.model) or not (args.checkpoint or args.pretrained):
        raise ValueError("name what to evaluate: --checkpoint RUN [RUN ...], or --model NAME --pretrained, or both")
    for path in [*(args.checkpoint or []), *([args.model] if args.pretrained else [])]:
        model, ckpt = load_model(path, ema=args.ema, device=device)
        cfg = ckpt.model_config
        trained_on = ckpt.train_config.get("data")
        spec = args.data or trained_on
        if not spec:
            raise ValueError(f"checkpoint {ckpt.path} does not record its data set; pass --data")
        data = open_data(spec, patch_size=cfg.patch_size)
        check_model_fits_data(cfg, data.info, trained_on=ckpt.data, checkpoint=path)
        if task not in (None, data.info.task):
            raise ValueError("all checkpoints in one table must share a task (classification or regression)")
        task = data.info.task
        sizes = args.resolutions or [cfg.image_hw]
        prepared = ckpt.data_config
        crop = args.eval_crop or prepared.crop_pct
        if not 0 < crop <= 1:
            raise ValueError(f"--eval-crop {crop} must lie in (0, 1]: the fraction of the resized image kept")
        folder = ckpt.path.parent.parent if ckpt.path.parent.name == CHECKPOINTS else ckpt.path
        split_name = data.test_name if args.split == "test" else args.split
        # another data set than the run's: told apart by absolute paths (an earlier version recorded them as given)
        other = data.info.spec if trained_on and anchored_spec(data.info.spec) != anchored_spec(trained_on) else None
        released = is_released(ckpt.path)  # no folder of its own
        raw = data.split(args.split)
        split = for_evaluation(raw, crop, prepared.interpolation)
        changed = _changes(sizes, cfg.image_hw, crop if split is not raw and crop != prepared.crop_pct else None)
        file = None if released else folder / _file_name(split_name, args.ema, other, changed)
        if args.out is None and file is not None:
            if file in (earlier for earlier, _ in records):
                raise ValueError(f"two checkpoints would write {file}; name one file for all with --out FILE")
            check_outputs((file, file.with_suffix(".md")), "eval", args.force)
        results = evaluate_resolutions(
            model, split, sizes, batch_size=args.batch_size, device=device, workers=args.workers
        )
        rows.append((folder.name + (" (EMA)" if args.ema else ""), sum(p.numel() for p in model.parameters()), results))
        splits.add(split_name)
        specs.add(spec)
        record = _record(ckpt.path, spec, split_name, args.ema, rows[-1][1], results, task_kind(task))
        records.append((file, record | ({"eval_crop": crop} if split is not raw else {})))  # photographs only
    assert task is not None, "--checkpoint takes one run or more"
    kind = task_kind(task)
    table = _caption(kind, splits, specs) + "\n\n" + resolution_table(rows, task)
    print(table)
    if kind.details:  # every metric, as DETR's evaluation prints COCO's
        names = [kind.headline, *(key for key, _ in kind.details)]
        for name, _, results in rows:
            for (h, w), metrics in results.items():
                shown = (kind.format_metric(k, metrics[k]) if k in metrics else f"{k} -" for k in names)
                print(f"{name} at {h}x{w} on {split_name}: " + "  ".join(shown))
    written = _write(records, table, args.out)
    if written:
        print("wrote " + ", ".join(map(str, written)))
    if args.out is None and any(file is None for file, _ in records):
        print("released weights have no run folder to keep their results in; --out FILE writes them")
    return 0


def _changes(sizes: list, trained: tuple[int, int], crop: float | None) -> str:
    """``-atSIZES`` for sizes other than the training size, ``-cropX`` for another crop (None: the run's)."""
    pairs = [(s, s) if isinstance(s, int) else tuple(s) for s in sizes]
    text = ",".join(f"{h}" if h == w else f"{h}x{w}" for h, w in pairs)
    if len(text) > 64:  # a long sweep: its hash keeps the name short
        text = hashlib.sha256(text.encode()).hexdigest()[:8]
    return ("" if pairs == [tuple(trained)] else f"-at{text}") + ("" if crop is None else f"-crop{crop:g}")


def _file_name(split: str, ema: bool, other_data: str | None, changes: str = "") -> str:
    """``eval-SPLIT[-ema][-atSIZES][-cropX][-data-HASH].json``: one file per evaluation of a folder's checkpoint."""
    data = f"-data-{hashlib.sha256(other_data.encode()).hexdigest()[:8]}" if other_data else ""
    return f"eval-{split}{'-ema' if ema else ''}{changes}{data}.json"


def _caption(kind: TaskKind, splits: set[str], specs: set[str]) -> str:
    """The line above the table: the metric and its unit, the split and the data set."""
    unit = "in %" if kind.is_percent(kind.headline) else f"as {kind.unit}"
    split = " and ".join(sorted(splits))
    data = f" of {next(iter(specs))}" if len(specs) == 1 else " of each run's data"
    return f"{kind.headline} {unit} on the {split} split{data}, by input size"


def _record(checkpoint: Path, spec: str, split: str, ema: bool, params: int, results: dict, kind: TaskKind) -> dict:
    """One checkpoint's results for JSON: every metric at every size, their units, and what was evaluated
    (``split`` as the data set names it)."""
    return {
        "task": kind.name,
        "headline": kind.headline,
        "units": {k: "%" for metrics in results.values() for k in metrics if kind.is_percent(k)},
        "checkpoint": str(checkpoint),
        "data": spec,
        "split": split,
        "ema": ema,
        "params": params,
        "results": {f"{h}x{w}": metrics for (h, w), metrics in results.items()},
    }


def _write(records: list[tuple[Path | None, dict]], table: str, out: Path | None) -> list[Path]:
    """``out`` and its ``.md`` table, or each evaluated folder's own JSON file and its ``.md`` table (released
    weights, with no folder, have none)."""
    if out is not None:
        write_atomic(out.with_suffix(".md"), table + "\n")
        return [write_json(out, {"runs": [record for _, record in records]}), out.with_suffix(".md")]
    written = []
    for file, record in records:
        if file is None:
            continue
        write_atomic(file.with_suffix(".md"), table + "\n")
        written += [write_json(file, record), file.with_suffix(".md")]
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
        metavar="RUN",
        help="run folders (their newest checkpoint) or checkpoint folders; released files, URLs or presets with "
        "released weights; one table row each",
    )
    p.add_argument("--model", metavar="NAME", help="with --pretrained: the preset whose released weights to evaluate")
    p.add_argument(
        "--pretrained",
        action="store_true",
        help="evaluate the released weights of --model (a row after --checkpoint's), downloaded once into the weights "
        "cache; give --data",
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
        "(default: eval-SPLIT.json and eval-SPLIT.md in each evaluated folder)",
    )
    p.add_argument("--force", action="store_true", help="replace the files an earlier vitpos eval wrote (only those)")
    p.set_defaults(func=run)
