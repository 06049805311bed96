"""``python -m bench``: throughput and peak memory of every slot value, as ratios to no PE, and
iRPE's efficient path against the literal reference.

Every row of a table is measured in the same process run as its baseline, with a fixed thread
count, warm-up, and the median of repeated, interleaved timings; the spread is min-max.
``--out BENCHMARKS.md`` writes the report, with a sentence for every missed target.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

from .cases import BASELINE, CASES, TARGETS, Case
from .gpu.report import NOT_MEASURED, gpu_section, replace_section
from .reference import report as reference_report
from .report import Miss, render, target_misses
from .timing import Timing, build, image_side, paired_overheads, peak_memory, step_fn


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--models", default="deit_tiny_patch16_224,deit_small_patch16_224", help="comma-separated presets")
    p.add_argument(
        "--tokens",
        default="196,784",
        help="comma-separated patch-token counts (square grids); "
        "for pyramids the last stage's (49 = 224x224 at stride 32)",
    )
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (fixed for every case)")
    p.add_argument("--batch", type=int, default=8, help="images per step at 196 tokens (scaled down at more tokens)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7, help="rounds of paired timings per case (median reported)")
    p.add_argument("--iters", type=int, default=1, help="training steps per timing")
    p.add_argument("--infer-iters", type=int, default=2, help="inference forwards per timing (they are short)")
    p.add_argument("--cases", default="", help="comma-separated case labels to run (default: all available)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    p.add_argument(
        "--reference-tokens", default="196,784,3136", help="token counts of the iRPE reference comparison ('' skips it)"
    )
    p.add_argument(
        "--reference-model", default="deit_tiny_patch16_224", help="preset whose width and heads the compared layer has"
    )
    p.add_argument("--reference-spec", default="irpe:product:ctx:qkv", help="relative slot value of the compared layer")
    p.add_argument("--reference-repeats", type=int, default=3)
    p.add_argument(
        "--reference-budget-gib", type=float, default=4.0,
        help="run the literal reference only where its N x N x d tables fit in this many GiB",
    )  # fmt: skip
    p.add_argument("--note", default="", help="a line printed at the top of the report (e.g. about the machine)")
    p.add_argument("--out", default="", help="write the markdown report to this file")
    return p.parse_args(argv)


def fmt_timing(t: Timing) -> str:
    return f"{t.median:7.1f} ({t.low:.1f}–{t.high:.1f})"


def fmt_overhead(t: Timing, is_baseline: bool) -> str:
    return "baseline" if is_baseline else f"{t.median:+.1%} ({t.low:+.1%} to {t.high:+.1%})"


def verdict(misses: list[Miss], label: str, model: str, tokens: int) -> str:
    """'met' / 'MISSED' against the time targets (DeiT-S, 196 tokens only)."""
    if label not in TARGETS or "small" not in model or tokens != 196:
        return ""
    train_limit, infer_limit = TARGETS[label]
    ok = not any(m.what in ("train", "infer") for m in misses)
    limits = f"≤{train_limit:.0%}" + (f", infer ≤{infer_limit:.1%}" if infer_limit else "")
    return f"{'met' if ok else 'MISSED'} ({limits})"


def run_group(model: str, tokens: int, cases: list[Case], args: argparse.Namespace) -> tuple[list[str], list[Miss]]:
    """Benchmark every case for one (model, tokens) pair; returns markdown table rows and missed targets."""
    batch = max(1, args.batch * 196 // tokens)
    side = image_side(model, tokens)
    unfit = {c.label: c.fits(model, side) for c in cases}
    rows = [
        f"| {model} | {tokens} | {label} | — | — | — | — | — | does not build: {why} |"
        for label, why in unfit.items()
        if why
    ]
    for row in rows:
        print(row, flush=True)
    cases = [c for c in cases if not unfit[c.label]]
    images = torch.randn(batch, 3, side, side)
    results: dict[str, dict[str, Timing]] = {}
    overheads: dict[str, dict[str, Timing]] = {}
    for mode, iters in (("train", args.iters), ("infer", args.infer_iters)):
        torch.manual_seed(0)
        steps = {c.label: step_fn(build(model, c.position, tokens), images, mode) for c in cases}
        results[mode], overheads[mode] = paired_overheads(
            steps, BASELINE.label, batch, warmup=args.warmup, repeats=args.repeats, iters=iters
        )  # fmt: skip
        del steps
    memory = {}
    if not args.no_memory:
        memory = {c.label: peak_memory(model, c.position, tokens, batch) for c in cases}
    misses: list[Miss] = []
    for c in cases:
        tr, inf = results["train"][c.label], results["infer"][c.label]
        tr_oh, inf_oh = overheads["train"][c.label], overheads["infer"][c.label]
        ratio = memory[c.label] / memory[BASELINE.label] if memory else None
        row_misses = target_misses(model, tokens, c.label, tr_oh, inf_oh, ratio)
        misses += row_misses
        mem = ""
        if memory:
            flag = " MISSED" if any(m.what == "memory" for m in row_misses) else ""
            mem = f"{memory[c.label] / 2**20:7.0f} MiB ×{ratio:.2f}{flag}"
        rows.append(
            f"| {model} | {tokens} | {c.label} | {fmt_timing(tr)} | {fmt_overhead(tr_oh, c is BASELINE)} "
            f"| {fmt_timing(inf)} | {fmt_overhead(inf_oh, c is BASELINE)} "
            f"| {mem} | {verdict(row_misses, c.label, model, tokens)} |"
        )
        print(rows[-1], flush=True)
    return rows, misses


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    wanted = {s.strip() for s in args.cases.split(",") if s.strip()}
    cases = [c for c in CASES if c.available() and (not wanted or c.label in wanted or c is BASELINE)]
    skipped = [c.label for c in CASES if not c.available()]
    header = [
        "| model | tokens | case | train img/s (min–max) | train overhead (min to max) | infer img/s (min–max) "
        "| infer overhead (min to max) | peak train memory | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(header), flush=True)
    rows, misses = [], []
    for model in args.models.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            group_rows, group_misses = run_group(model.strip(), tokens, cases, args)
            rows += group_rows
            misses += group_misses
    reference = []
    if args.reference_tokens:
        print(flush=True)
        reference = reference_report(
            args.reference_model, args.reference_spec, [int(t) for t in args.reference_tokens.split(",")],
            repeats=args.reference_repeats, budget_gib=args.reference_budget_gib,
        )  # fmt: skip
    if args.out:
        command = shlex.join(["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])])
        text = render(
            command=command, threads=args.threads, minutes=(time.perf_counter() - start) / 60, note=args.note,
            table=header + rows, misses=misses, skipped=skipped, reference=reference,
        )  # fmt: skip
        out = Path(args.out)
        previous = out.read_text() if out.exists() else ""
        # the GPU section, written by python -m bench.gpu, stays
        out.write_text(replace_section(text, gpu_section(previous) or NOT_MEASURED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
