"""``vitpos pretrain-pe``: pretrain a position encoding on direction4 then distance (thesis §5.1).

The saved file starts any model with the same encoding and width:
``vitpos train --init-pe FILE ...``. The probes show the relative-location bias it gained.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..engine.config import TrainConfig
from ..files import write_json
from ..models.factory import get_config
from ..ownership import check_outputs
from ..pretrain import PRETRAIN_TASKS, pretrain_position_encoding
from ..spec import non_negative_int, positive_float, positive_int
from ..tasks import task_kind
from .options import option_type

STUDY_FOURIER = "fourier:gamma=2:scale=10"
"""The Fourier settings the study pretrains (docs/study.md, "Family settings"): a kernel about two patches
wide, and outputs scaled so the cells' encodings differ enough for the model to tell them apart."""


def run(args: argparse.Namespace) -> int:
    model_cfg = get_config(args.model, absolute=args.absolute)
    out = args.out or Path("runs") / "pretrain-pe" / f"{model_cfg.position.spec('absolute').name}.safetensors"
    if out.suffix == ".json":
        raise ValueError(f"--out {out}: the summary is written beside it with .json; name a .safetensors file")
    check_outputs((out, out.with_suffix(".json")), "pretrain-pe", args.force)
    train_cfg = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        device=args.device,
        progress=args.progress,
    )
    print(f"pretraining {model_cfg.position.absolute} on {' then '.join(PRETRAIN_TASKS)}, {args.size} images each ...")
    start = time.perf_counter()
    result = pretrain_position_encoding(model_cfg, out, train_cfg, size=args.size)
    for task, metrics in result.test.items():
        kind = task_kind("regression" if "r2" in metrics else "classification")
        print(f"  {task:10s} test split: " + "  ".join(kind.format_metric(k, v) for k, v in metrics.items()))
    # probe scores on the 0-to-1 scale of `vitpos probe`: accuracies beside an R²
    print(f"{'probe':10s} {'left/right':>10s} {'up/down':>8s} {'(dx,dy) R²':>10s}   (probe scores, 0 to 1)")
    for stage, probe in (("before", result.before), ("after", result.after)):
        print(f"{stage:10s} {probe.left_right:10.3f} {probe.up_down:8.3f} {probe.distance_r2:10.3f}")
    write_json(out.with_suffix(".json"), result.to_dict())
    wrote = f"wrote {out} ({time.perf_counter() - start:.0f} s)"
    if result.at_chance:
        stuck = "; ".join(f"{task} {note}" for task, note in result.at_chance.items())
        print(
            f"{wrote}, but its pretraining learned too little to use ({stuck}): try more --epochs or --size, or "
            "another --lr"
        )
    else:
        print(f"{wrote}; use it with: vitpos train --init-pe {out} --absolute {model_cfg.position.absolute} ...")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain-pe",
        help="pretrain a position encoding on the red-green tasks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="thesis_vit", help="preset the encoding is trained in (default thesis_vit)")
    p.add_argument(
        "--absolute",
        default=STUDY_FOURIER,
        metavar="SPEC",
        help=f"a learnable absolute encoding (default {STUDY_FOURIER}, the study's; with Fourier's own defaults, "
        "gamma 10 and no output scale, the pretraining sits at chance: docs/study.md, Family settings)",
    )
    p.add_argument(
        "--size",
        type=option_type(positive_int),
        default=5000,
        help="training images per task (default 5000, as the thesis)",
    )
    p.add_argument("--epochs", type=option_type(positive_int), default=20, help="epochs per task (default 20)")
    p.add_argument("--batch-size", type=option_type(positive_int), default=64, help="batch size (default 64)")
    p.add_argument("--lr", type=option_type(positive_float), default=2e-3, help="peak learning rate (default 2e-3)")
    p.add_argument("--seed", type=option_type(non_negative_int), default=0, help="seed (default 0)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default auto)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the output file and its .json if an earlier vitpos pretrain-pe wrote them",
    )
    p.add_argument("--out", type=Path, help="output file (default runs/pretrain-pe/<encoding>.safetensors)")
    p.set_defaults(func=run)
