"""``python -m bench.gpu``: every slot value against no PE on DeiT-S on one CUDA device.

bf16 autocast training steps and inference at 196 and 784 tokens, eager and compiled, paired
timings (:func:`bench.timing.paired_overheads`) with a CUDA synchronisation closing every step,
peak CUDA memory of a training step; training steps of every bucketed term on every attention
path that computes it (the fused ``triton`` path against no PE and against the best other path);
and vitpos against timm's DeiT-S and Swin-T in the same rounds when timm imports.
``--out BENCHMARKS.md`` replaces the GPU section of that file. Exits with a message where CUDA
is not available.
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
import torch.nn.functional as F

from vitpos.models.layers import Attention

from .cases import BASELINE
from .gpu_report import (
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
from .timing import build, image_side, paired_overheads

MODEL = "deit_small_patch16_224"
TIMM_PAIRS = {"deit_small_patch16_224": "deit_small_patch16_224", "swin_tiny": "swin_tiny_patch4_window7_224"}
"""vitpos preset -> the timm model it is timed against."""


def cuda_step(model: torch.nn.Module, images: torch.Tensor, mode: str, compiled: bool) -> Callable[[], None]:
    """One bf16 autocast training step (forward, backward, AdamW) or inference forward, synchronised."""
    net = torch.compile(model) if compiled else model
    labels = torch.zeros(images.shape[0], dtype=torch.long, device=images.device)
    if mode == "infer":
        model.eval()

        def infer() -> None:
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                net(images)
            torch.cuda.synchronize()

        return infer
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(images).float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    return train


def peak_bytes(step: Callable[[], None]) -> int:
    """Peak CUDA memory allocated during one more call of ``step``."""
    torch.cuda.reset_peak_memory_stats()
    step()
    return torch.cuda.max_memory_allocated()


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
        c.label: cuda_step(build(MODEL, c.position, group.tokens).cuda(), images, group.mode, group.compiled)
        for c in gpu_cases()
    }
    return timed_rows(group, steps, batch, args)


def run_paths(group: GpuGroup, args: argparse.Namespace) -> list[GpuRow]:
    """Every bucketed term on every attention path that computes its training step, against no PE."""
    batch, images = group_images(group, args)
    torch.manual_seed(0)
    steps = {
        BASELINE.label: cuda_step(build(MODEL, BASELINE.position, group.tokens).cuda(), images, "train", group.compiled)
    }
    for case, path in path_cases():
        model = on_path(build(MODEL, case.position, group.tokens).cuda(), path, images)
        if model is not None:
            steps[path_label(case.label, path)] = cuda_step(model, images, "train", group.compiled)
    return timed_rows(group, steps, batch, args)


def timed_rows(group: GpuGroup, steps: dict[str, Callable[[], None]], batch: int, args) -> list[GpuRow]:
    """Paired timings of ``steps`` against the baseline, and peak memory of training steps."""
    throughput, overheads = paired_overheads(
        steps, BASELINE.label, batch, warmup=args.warmup, repeats=args.repeats, iters=args.iters
    )
    peaks = {k: peak_bytes(fn) for k, fn in steps.items()} if group.mode == "train" else {}
    rows = [GpuRow(k, throughput[k].median, (o.median, o.low, o.high), peaks.get(k)) for k, o in overheads.items()]
    return sorted(rows, key=lambda r: r.label != BASELINE.label)


def run_timm(args: argparse.Namespace) -> list[str]:
    """vitpos presets against the timm models they follow, in the same rounds (bf16 training step, eager)."""
    import timm

    tables = []
    for ours, theirs in TIMM_PAIRS.items():
        images = torch.randn(args.batch, 3, 224, 224, device="cuda")
        steps = {
            f"timm {theirs}": cuda_step(timm.create_model(theirs).cuda(), images, "train", False),
            f"vitpos {ours}": cuda_step(
                build(ours, {}, 49 if ours == "swin_tiny" else 196).cuda(), images, "train", False
            ),
        }
        throughput, overheads = paired_overheads(
            steps, f"timm {theirs}", args.batch, warmup=args.warmup, repeats=args.repeats, iters=args.iters
        )
        rows = [GpuRow(k, throughput[k].median, (o.median, o.low, o.high)) for k, o in overheads.items()]
        tables.append(render_table(GpuGroup(224, "train", False), rows, f"timm {theirs}"))
    return [line for table in tables for line in table]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__)
    p.add_argument("--tokens", default="196,784", help="comma-separated patch-token counts")
    p.add_argument("--batch", type=int, default=256, help="images per step at 196 tokens (scaled down at more tokens)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--iters", type=int, default=5, help="steps per timing")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--no-paths", action="store_true", help="skip the bucketed terms on every attention path")
    p.add_argument("--out", default="", help="replace the GPU section of this markdown file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "python -m bench.gpu measures on CUDA, and no CUDA device is available here; run it on a GPU machine",
            file=sys.stderr,
        )
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
    command = shlex.join(["python", "-m", "bench.gpu", *(argv if argv is not None else sys.argv[1:])])
    section = render_section(torch.cuda.get_device_name(), torch.__version__, command, args.batch, tables)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
