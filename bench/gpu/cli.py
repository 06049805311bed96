"""The command line of ``python -m bench.gpu``: every slot value against no PE on DeiT-S on one CUDA device.

bf16 autocast training steps and inference at 196 and 784 tokens, eager and compiled, paired
timings (:func:`bench.timing.paired_overheads`) with a CUDA synchronisation closing every step,
peak CUDA memory of a training step; training steps of every bucketed term on every attention
path that computes it (the fused ``triton`` path against no PE and against the best other path);
and vitpos against timm's DeiT-S and Swin-T in the same rounds when timm imports.
``--out BENCHMARKS.md`` replaces the GPU section of that file. Exits with a message where CUDA
is not available. ``--quick`` runs the short check of :mod:`bench.gpu.quick` instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from vitpos.models.layers import Attention

from ..cases import BASELINE
from ..gpu_steps import bf16_step, peak_bytes
from ..quick_settings import MODEL, QuickSettings
from ..timing import build, image_side, paired_overheads
from . import quick as gpu_quick
from .check_layers import CheckShape
from .report import (
    GpuGroup,
    GpuRow,
    gpu_cases,
    gpu_groups,
    path_cases,
    path_label,
    render_path_table,
    render_section,
    render_table,
    replace_section,
)
from .session import DEFAULT_JSON as SESSION_JSON
from .session import SESSION_SECONDS, plan_lines, run_session, session_parts, session_plan
from .session_terms import DYNAMO

TIMM_PAIRS = {"deit_small_patch16_224": "deit_small_patch16_224", "swin_tiny": "swin_tiny_patch4_window7_224"}
"""vitpos preset -> the timm model it is timed against."""


def on_path(model: torch.nn.Module, path: str, images: torch.Tensor) -> torch.nn.Module | None:
    """``model`` with every attention layer on ``path``, or None where the path cannot compute its
    training step (the kernel would fall back to another path)."""
    for module in model.modules():
        if isinstance(module, Attention):
            module.path = path
    with warnings.catch_warnings(record=True) as caught, torch.autocast("cuda", dtype=torch.bfloat16):
        warnings.simplefilter("always")
        model(images[:1]).float().sum().backward()
    model.zero_grad(set_to_none=True)
    return None if any("cannot compute this call" in str(w.message) for w in caught) else model


def group_images(group: GpuGroup, args: argparse.Namespace) -> tuple[int, torch.Tensor]:
    """The batch size (scaled by 196 / tokens) and its random images."""
    batch = max(1, args.batch * 196 // group.tokens)
    side = image_side(MODEL, group.tokens)
    return batch, torch.randn(batch, 3, side, side, device="cuda")


def run_group(group: GpuGroup, args: argparse.Namespace) -> list[GpuRow]:
    """Every slot value against no PE for one group."""
    batch, images = group_images(group, args)
    torch.manual_seed(0)
    steps = {
        c.label: bf16_step(build(MODEL, c.position, group.tokens).cuda(), images, group.mode, group.compiled)
        for c in gpu_cases()
    }
    return timed_rows(group, steps, batch, args)


def run_paths(group: GpuGroup, args: argparse.Namespace) -> list[GpuRow]:
    """Every bucketed term on every attention path that computes its training step, against no PE."""
    batch, images = group_images(group, args)
    torch.manual_seed(0)
    steps = {
        BASELINE.label: bf16_step(build(MODEL, BASELINE.position, group.tokens).cuda(), images, "train", group.compiled)
    }
    for case, path in path_cases():
        model = on_path(build(MODEL, case.position, group.tokens).cuda(), path, images)
        if model is not None:
            steps[path_label(case.label, path)] = bf16_step(model, images, "train", group.compiled)
    return timed_rows(group, steps, batch, args)


def timed_rows(group: GpuGroup, steps: dict[str, Callable[[], None]], batch: int, args) -> list[GpuRow]:
    """Paired timings of ``steps`` against the baseline, and peak memory of training steps."""
    throughput, overheads = paired_overheads(
        steps, BASELINE.label, batch, warmup=args.warmup, repeats=args.repeats, iters=args.iters
    )
    peaks = {k: peak_bytes(fn, torch.device("cuda")) for k, fn in steps.items()} if group.mode == "train" else {}
    rows = [GpuRow(k, throughput[k].median, (o.median, o.low, o.high), peaks.get(k)) for k, o in overheads.items()]
    return sorted(rows, key=lambda r: r.label != BASELINE.label)


def run_timm(args: argparse.Namespace) -> list[str]:
    """vitpos presets against the timm models they follow, in the same rounds (bf16 training step, eager)."""
    import timm

    tables = []
    for ours, theirs in TIMM_PAIRS.items():
        images = torch.randn(args.batch, 3, 224, 224, device="cuda")
        steps = {
            f"timm {theirs}": bf16_step(timm.create_model(theirs).cuda(), images, "train", False),
            f"vitpos {ours}": bf16_step(
                build(ours, {}, 49 if ours == "swin_tiny" else 196).cuda(), images, "train", False
            ),
        }
        throughput, overheads = paired_overheads(
            steps, f"timm {theirs}", args.batch, warmup=args.warmup, repeats=args.repeats, iters=args.iters
        )
        rows = [GpuRow(k, throughput[k].median, (o.median, o.low, o.high)) for k, o in overheads.items()]
        tables.append(render_table(GpuGroup(224, "train", False), rows, f"timm {theirs}"))
    return [line for table in tables for line in table]


def _overrides(text: str) -> dict[str, int | float | str]:
    """``depth=1,embed_dim=32`` -> {'depth': 1, 'embed_dim': 32} (numbers where they parse)."""
    out: dict[str, int | float | str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--model-args takes key=value pairs separated by commas, got {item!r}")
        for kind in (int, float, str):
            try:
                out[key.strip()] = kind(value)
                break
            except ValueError:
                continue
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__)
    p.add_argument("--tokens", default="196,784", help="comma-separated patch-token counts")
    p.add_argument("--batch", type=int, default=256, help="images per step at 196 tokens (scaled down at more tokens)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=None, help="timing rounds (default 7; 3 with --quick)")
    p.add_argument("--iters", type=int, default=None, help="steps per timing (default 5; 2 with --quick)")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--no-paths", action="store_true", help="skip the bucketed terms on every attention path")
    p.add_argument("--out", default="", help="replace the GPU section (with --quick: the quick check's) of this file")
    quick = p.add_argument_group("--quick", "a check sized for one short call: parts (i) to (v) of bench/gpu/quick.py")
    quick.add_argument("--quick", action="store_true", help="the short check instead of the long tables")
    quick.add_argument("--json", default="", help=f"where the rows go (default {gpu_quick.DEFAULT_JSON})")
    quick.add_argument(
        "--budget", type=float, default=None, help="seconds for all parts, compiling included (240; --session: 540)"
    )
    quick.add_argument("--device", default="cuda", help="the device the check runs on (cpu for a smoke test)")
    quick.add_argument("--model", default=MODEL, help="the model of parts (ii), (iii) and (v)")
    quick.add_argument("--model-args", default="", help="overrides of that model's preset, e.g. depth=1,embed_dim=32")
    defaults = CheckShape()
    check_help = {
        "side": "grid side of part (i)'s layers, in patches",
        "dim": "their width",
        "heads": "their heads",
        "batch": "their batch",
        "window": "Swin's window side (the grid side must be a larger multiple of it)",
    }
    for name, text in check_help.items():
        quick.add_argument(
            f"--check-{name}", type=int, default=getattr(defaults, name), help=f"{text} (default %(default)s)"
        )
    quick.add_argument("--check-cases", default="", help="comma-separated labels of part (i)'s cases (default: all)")
    quick.add_argument(
        "--parts",
        default="",
        help="comma-separated parts to run (default: all), e.g. correctness (--session: terms, ...)",
    )
    quick.add_argument("--ensemble-members", default="1,10,30,all", help="part (vii)'s stack sizes (all: a family's)")
    session = p.add_argument_group("--session", "the whole GPU session in one command (bench/gpu/session.py)")
    session.add_argument("--session", action="store_true", help="every part of the session, timing first")
    session.add_argument("--dry-run", action="store_true", help="print the session's plan and budgets, run nothing")
    session.add_argument("--session-part", default="", help=argparse.SUPPRESS)  # a part's own process
    session.add_argument("--part-budget", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    short = args.quick or args.session or bool(args.session_part)
    args.repeats = args.repeats or (3 if short else 7)
    args.iters = args.iters or (2 if short else 5)
    if args.budget is None:
        args.budget = SESSION_SECONDS if args.session else 240.0
    if args.dry_run and not args.session:
        p.error("--dry-run prints the plan of --session: pass both")
    try:
        args.device = torch.device(args.device)
        args.model_args = _overrides(args.model_args)
        session = args.session or bool(args.session_part)
        args.parts = session_parts(args.parts) if session else gpu_quick.selected_parts(args.parts)
        args.check_cases = tuple(filter(None, args.check_cases.split(",")))
        gpu_quick.selected_cases(args.check_cases)
        args.check = CheckShape(*(getattr(args, f"check_{n}") for n in ("side", "dim", "heads", "batch", "window")))
    except (RuntimeError, ValueError) as err:
        p.error(str(err))
    return args


def quick_settings(args: argparse.Namespace) -> QuickSettings:
    """The settings of ``--quick`` from the command line."""
    return QuickSettings(
        device=args.device,
        model=args.model,
        model_args=args.model_args,
        tokens=tuple(int(t) for t in args.tokens.split(",")),
        batch=args.batch,
        repeats=args.repeats,
        iters=args.iters,
        compiled=not args.no_compile,
        check=args.check,
        cases=args.check_cases,
        parts=args.parts,
        budget_s=args.budget,
        ensemble_members=args.ensemble_members,
    )


def _session(args: argparse.Namespace, argv: list[str]) -> int:
    """``--session`` (every part, each in its own process) or one part of it (``--session-part``)."""
    s = quick_settings(args)
    json_path = Path(args.json) if args.json else SESSION_JSON
    if args.session_part:
        from .session_part import run_part

        return run_part(args.session_part, s, json_path, args.out, args.part_budget)
    command = shlex.join(["python", "-m", "bench.gpu", *argv])
    header = {"command": command, "device": gpu_quick.device_name(s.device), **gpu_quick.versions()}
    header |= {"settings": gpu_quick.settings_dict(s), "dynamo": DYNAMO}
    return run_session(argv, session_plan(s.tokens, args.budget, args.parts), json_path, header, args.out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    argv = argv if argv is not None else sys.argv[1:]
    if args.session and args.dry_run:
        tokens = tuple(int(t) for t in args.tokens.split(","))
        print("\n".join(plan_lines(session_plan(tokens, args.budget, args.parts), str(args.device))))
        return 0
    if args.device.type == "cuda" and not torch.cuda.is_available():
        print(
            "python -m bench.gpu measures on CUDA, and no CUDA device is available here; run it on a GPU machine",
            file=sys.stderr,
        )
        return 2
    if args.session or args.session_part:
        return _session(args, argv)
    if args.quick:
        return gpu_quick.main(quick_settings(args), args.json, argv, args.out)
    if args.device.type != "cuda":
        print("the long tables run on CUDA only; --device applies to --quick", file=sys.stderr)
        return 2
    groups = gpu_groups(tuple(int(t) for t in args.tokens.split(",")), (False,) if args.no_compile else (False, True))
    tables = []
    for group in groups:
        tables.append(render_table(group, run_group(group, args), BASELINE.label))
        print("\n".join(tables[-1]), flush=True)
        if group.mode == "train" and not args.no_paths:
            tables.append(render_path_table(group, run_paths(group, args), BASELINE.label))
            print("\n".join(tables[-1]), flush=True)
    if importlib.util.find_spec("timm") is not None:
        tables.append(["### vitpos against timm (224 px, training step, eager)", "", *run_timm(args)])
    command = shlex.join(["python", "-m", "bench.gpu", *argv])
    section = render_section(torch.cuda.get_device_name(), torch.__version__, command, args.batch, tables)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section))
    return 0
