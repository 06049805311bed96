"""``python -m bench``: throughput and peak memory of every slot value, as ratios to no PE.

Every row of a table is measured in the same process run as its baseline, with a fixed thread
count, warm-up, and the median of repeated, interleaved timings; the spread is min-max.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys

import torch

from .cases import BASELINE, CASES, MEMORY_TARGET, TARGETS, Case
from .timing import Timing, build, image_side, interleaved_throughput, peak_memory, step_fn


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--models", default="deit_tiny_patch16_224,deit_small_patch16_224", help="comma-separated presets")
    p.add_argument("--tokens", default="196,784", help="comma-separated patch-token counts (square grids)")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (fixed for every case)")
    p.add_argument("--batch", type=int, default=8, help="images per step at 196 tokens (scaled down at more tokens)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7, help="timings per case (median reported)")
    p.add_argument("--iters", type=int, default=2, help="steps per timing")
    p.add_argument("--cases", default="", help="comma-separated case labels to run (default: all available)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    p.add_argument("--out", default="", help="write the markdown report to this file")
    return p.parse_args(argv)


def overhead(base: float, value: float) -> float:
    """Relative extra time per image versus the baseline throughput."""
    return base / value - 1.0


def fmt_timing(t: Timing) -> str:
    return f"{t.median:7.1f} ({t.low:.1f}–{t.high:.1f})"


def verdict(label: str, model: str, tokens: int, train_oh: float, infer_oh: float) -> str:
    """'met' / 'MISSED' against the targets (DeiT-S, 196 tokens only)."""
    if label not in TARGETS or "small" not in model or tokens != 196:
        return ""
    train_limit, infer_limit = TARGETS[label]
    ok = train_oh <= train_limit and (infer_limit is None or infer_oh <= infer_limit)
    limits = f"≤{train_limit:.0%}" + (f", infer ≤{infer_limit:.1%}" if infer_limit else "")
    return f"{'met' if ok else 'MISSED'} ({limits})"


def run_group(model: str, tokens: int, cases: list[Case], args: argparse.Namespace) -> list[str]:
    """Benchmark every case for one (model, tokens) pair; returns markdown table rows."""
    batch = max(1, args.batch * 196 // tokens)
    side = image_side(model, tokens)
    images = torch.randn(batch, 3, side, side)
    results: dict[str, dict[str, Timing]] = {}
    for mode in ("train", "infer"):
        torch.manual_seed(0)
        steps = {c.label: step_fn(build(model, c.slots, tokens), images, mode) for c in cases}
        results[mode] = interleaved_throughput(steps, batch, warmup=args.warmup, repeats=args.repeats, iters=args.iters)
        del steps
    memory = {}
    if not args.no_memory:
        memory = {c.label: peak_memory(model, c.slots, tokens, batch) for c in cases}
    rows = []
    base_train, base_infer = results["train"][BASELINE.label].median, results["infer"][BASELINE.label].median
    for c in cases:
        tr, inf = results["train"][c.label], results["infer"][c.label]
        tr_oh, inf_oh = overhead(base_train, tr.median), overhead(base_infer, inf.median)
        mem = ""
        if memory:
            ratio = memory[c.label] / memory[BASELINE.label]
            flag = " MISSED" if c.label.startswith("iRPE") and tokens == 784 and ratio > MEMORY_TARGET else ""
            mem = f"{memory[c.label] / 2**20:7.0f} MiB ×{ratio:.2f}{flag}"
        rows.append(
            f"| {model} | {tokens} | {c.label} | {fmt_timing(tr)} | {tr_oh:+.1%} | {fmt_timing(inf)} | {inf_oh:+.1%} "
            f"| {mem} | {verdict(c.label, model, tokens, tr_oh, inf_oh)} |"
        )
        print(rows[-1], flush=True)
    return rows


def machine() -> str:
    """CPU model, cores, torch version."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}; torch {torch.__version__}; Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    wanted = {s.strip() for s in args.cases.split(",") if s.strip()}
    cases = [c for c in CASES if c.available() and (not wanted or c.label in wanted or c is BASELINE)]
    skipped = [c.label for c in CASES if not c.available()]
    header = [
        "| model | tokens | case | train img/s (min–max) | train overhead | infer img/s (min–max) | infer overhead | peak train memory | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(header), flush=True)
    rows = []
    for model in args.models.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            rows += run_group(model.strip(), tokens, cases, args)
    if args.out:
        command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        lines = [
            f"Measured {datetime.date.today().isoformat()} on {machine()}, {args.threads} threads, float32.",
            f"Command: `{command.strip()}`",
            "",
            *header,
            *rows,
        ]
        if skipped:
            lines += ["", f"Not available in this build: {', '.join(skipped)}."]
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
