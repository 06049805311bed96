"""``vitpos study``: train small ViTs with each position-encoding family on the red-green tasks
and write a report with tables and figures (thesis §4-5; CPVT, iRPE and LaPE slots).

Every run trains until its validation metric stops improving (--patience epochs), within a cap of
--epochs; each family's learning rate per task is chosen first from --lr-grid on two seeds no report uses.
The default (5 seeds per family, up to 20 for the claims still undecided) took about 14 min on two free
cores, 28 CPU-minutes (docs/study.md); ``--full`` is the
thesis protocol (10 seeds, 5000/1000/1000 images, at most 30 epochs), meant for a GPU. The report opens
with a verdict per published claim. Run the same command again to continue an interrupted study.
``--task detect`` (iRPE Table 6, tiny DETRs) and ``--task segment`` (CPVT Table 13, tiny PVT Semantic
FPNs) run the dense-prediction studies on synthetic images of varied sizes instead.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from ..ownership import claim, start_over
from ..spec import positive_int
from ..study import BUILT_IN_FAMILIES, DEFAULT_FAMILIES, StudyConfig, parse_family, run_study
from ..study.dense import DenseStudy
from ..study.detect import DETECT_FAMILIES, DetectStudyConfig
from ..study.folder import SETTINGS_FILE
from ..study.report import report_from_results
from ..study.run import resolve_device
from ..study.segment import SEGMENT_FAMILIES, SegmentStudyConfig
from .options import option_type


def _rate_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated learning rates, e.g. 1e-3,3e-3") from None


def _size_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated integers, e.g. 100,300") from None


_OPTIONS = ("seeds", "rounds", "epochs", "patience", "lr_grid", "train_size", "efficiency_sizes", "resolutions")
"""Options that replace a field of the study's settings."""


def build_config(args: argparse.Namespace) -> StudyConfig:
    """The study the options describe: the default or ``--full``, with each given option replaced."""
    overrides = {name: getattr(args, name) for name in _OPTIONS if getattr(args, name) is not None}
    if args.family:
        overrides["families"] = tuple(parse_family(text) for text in args.family)
    return StudyConfig.full(**overrides) if args.full else StudyConfig(**overrides)


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this study (for the report)."""
    parts = (
        ["vitpos", "study"]
        + (["--full"] if args.full else [])
        + (["--task", args.task] if args.task != "classify" else [])
        + (["--compile"] if args.compile else [])
    )
    for name in _OPTIONS:
        value = getattr(args, name)
        if value is not None:
            parts += [
                f"--{name.replace('_', '-')}",
                ",".join(map(str, value)) if isinstance(value, tuple) else str(value),
            ]
    for text in args.family or ():
        parts += ["--family", text]
    if args.out != Path("runs/study"):
        parts += ["--out", str(args.out)]
    return " ".join(shlex.quote(p) for p in parts)


_ENSEMBLE = {"auto": None, "on": True, "off": False}


_DENSE: dict[str, type[DenseStudy]] = {"detect": DetectStudyConfig, "segment": SegmentStudyConfig}
"""The dense-prediction studies by ``--task``."""


def run_dense(args: argparse.Namespace) -> int:
    """``--task detect`` (iRPE Table 6, :mod:`vitpos.study.detect`) or ``--task segment`` (CPVT Table 13,
    :mod:`vitpos.study.segment`)."""
    if (
        args.full
        or args.report_only
        or args.efficiency_sizes
        or args.resolutions
        or args.patience
        or args.lr_grid
        or args.rounds
        or args.compile
    ):
        raise ValueError(
            f"--task {args.task} takes --seeds, --epochs, --train-size, --family, --workers, --device, --out and "
            "--fresh"
        )
    overrides = {
        name: getattr(args, name) for name in ("seeds", "epochs", "train_size") if getattr(args, name) is not None
    }
    if args.family:
        overrides["families"] = tuple(args.family)
    out = args.out if args.out != Path("runs/study") else Path(f"runs/study-{args.task}")
    return _run(_DENSE[args.task](**overrides), out, args, ensemble=False)  # dense cells train one by one


def _run(config: StudyConfig | DenseStudy, out: Path, args: argparse.Namespace, ensemble: bool | None) -> int:
    """Run ``config`` into ``out`` with the options every study takes."""
    if args.fresh:
        start_over(out, "study", "--fresh")
    claim(out, strict=not (out / SETTINGS_FILE).is_file())  # a new study replaces none of the folder's files
    device = resolve_device(args.device)
    workers = (
        args.workers if args.workers is not None else min(4 if device.startswith("cuda") else 2, os.cpu_count() or 1)
    )
    run_study(
        config, out, command=_command(args), workers=workers, device=device, ensemble=ensemble, compile=args.compile
    )
    return 0


def run(args: argparse.Namespace) -> int:
    if args.task in _DENSE:
        return run_dense(args)
    if args.report_only:
        claim(args.out)
        print(f"wrote {report_from_results(args.out)}")
        return 0
    return _run(build_config(args), args.out, args, _ENSEMBLE[args.ensemble])


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "study",
        help="compare position encodings on the red-green tasks and write a report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--task",
        choices=("classify", *_DENSE),
        default="classify",
        help="classify: the red-green tasks (default); detect: iRPE Table 6's claims with tiny DETRs on "
        "synthetic:detect (families: " + ", ".join(DETECT_FAMILIES) + "; default folder runs/study-detect); "
        "segment: CPVT Table 13's claims with tiny PVT Semantic FPNs on synthetic:segment_absolute (families: "
        + ", ".join(SEGMENT_FAMILIES)
        + "; default folder runs/study-segment)",
    )
    p.add_argument(
        "--full", action="store_true", help="the thesis protocol: 10 seeds, 5000/1000/1000 images, 30 epochs"
    )
    p.add_argument(
        "--family",
        action="append",
        metavar="FAMILY",
        help="a family to compare (repeatable; replaces the default list): a built-in label ("
        + ", ".join(f.label for f in BUILT_IN_FAMILIES)
        + "; the default list: "
        + ", ".join(f.label for f in DEFAULT_FAMILIES)
        + ") or 'label: [host=pvt|swin] slot=spec ... "
        "[head=gap] [option=value ...] [pretrained]'",
    )
    p.add_argument("--seeds", type=int, help="seeds per cell in the first round (default 5; --full 10)")
    p.add_argument(
        "--rounds",
        type=int,
        help="looks of the sequential rule: a claim still undecided after a round gets its runs on twice the "
        "seeds, up to this many rounds (default 3: 5, 10, 20 seeds); 1: one round",
    )
    p.add_argument(
        "--epochs",
        type=int,
        help="the cap: at most this many epochs over the full training set (default 20; --full 30); "
        "a run stops earlier once its validation metric stops improving",
    )
    p.add_argument(
        "--patience", type=int, help="epochs without a better validation metric before a run stops (default 4)"
    )
    p.add_argument(
        "--lr-grid",
        type=_rate_list,
        metavar="LR,LR",
        help="learning rates tried per family and task on an unreported seed (default 0.002,0.005)",
    )
    p.add_argument("--train-size", type=int, help="training images per task")
    p.add_argument(
        "--efficiency-sizes", type=_size_list, metavar="N,N", help="smaller training sets for the learning curves"
    )
    p.add_argument(
        "--resolutions", type=_size_list, metavar="PX,PX", help="evaluation image sizes of the direction models"
    )
    p.add_argument(
        "--workers",
        type=option_type(positive_int),
        help="training jobs at once, one process each (default: 2 on a CPU, 4 on CUDA: several ensembles in "
        "flight; at most the number of cores)",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: cuda where present, else cpu)")
    p.add_argument(
        "--ensemble",
        choices=tuple(_ENSEMBLE),
        default="auto",
        help="train the seeds, tasks and training-set sizes of one family, and each family's learning-rate "
        "trials, as one stacked ensemble (exact; default auto: on "
        "CUDA, where it fills the GPU, off on a CPU, where it measured slower)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile each stacked ensemble's training step with torch.compile (CUDA graphs on CUDA); off by "
        "default until a GPU measurement shows it faster (python -m bench.ensemble --rate --compile "
        "off,reduce-overhead)",
    )
    p.add_argument("--out", type=Path, default=Path("runs/study"), help="the study folder (default runs/study)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="delete the study's files first (only the files it wrote; refused while the folder holds others) "
        "instead of continuing it",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite report.md and the figures from the folder's results.json; train nothing",
    )
    p.set_defaults(func=run)
