"""``python -m bench.quick_report ROWS.json [--out BENCHMARKS.md] [--table [--policy FILE]]``: the rows of a
quick GPU check or a GPU session as a markdown section, from a finished run or from one cut short (what it
measured, and what it did not); ``--table``: the rows of the CUDA policy's table that the fastest paths
propose, as Python lines (and the kernels' pinned configurations the session's tunings propose);
``--policy FILE`` writes those rows into FILE's ``CUDA_TABLE``: a path becomes a default only this way."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .gpu.path_report import path_table, pinned_lines, proposed_rows, table_lines, write_policy
from .gpu.report import replace_section

HEADING = "## GPU quick check"
NOT_RUN = (
    f"{HEADING}\n\nNot run on a GPU yet: `python -m bench.gpu --quick --out BENCHMARKS.md` on a machine with "
    "CUDA writes this section (device, torch, triton and timm versions, command; correctness of every bucketed "
    "relative encoding on every attention path against the float64 literal reference, first and second call, "
    "float32 and bf16 autocast; bf16 training-step overhead on DeiT-S at 196 and 784 tokens of every bucketed "
    "term on every path that computes it, first calls apart, the fastest marked and the policy rows they propose, "
    "and of every other slot value with the path it took; compiled DeiT-S with iRPE ctx k against compiled "
    "timm DeiT-S; `swin_tiny` against timm's Swin-T; the DeiT recipe's device-side augmentation in images/s). "
    "`python -m bench.quick_report ROWS.json --out BENCHMARKS.md` writes it from the JSON rows of a run, "
    "also of one cut short.\n"
)


def _percent(row: dict[str, Any]) -> str:
    return f"{row['overhead']:+.1%} ({row['overhead_low']:+.1%} to {row['overhead_high']:+.1%})"


def correctness_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per (path asked, precision): calls checked, failures, largest output and gradient errors."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["path"], r["precision"]), []).append(r)
    lines = [
        "| path asked | precision | calls | failed | largest output error | largest gradient error | took |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (path, precision), group in groups.items():
        measured = [r for r in group if "output_error" in r]
        failed = sum(not r["pass"] for r in group)
        out = max((r["output_error"] for r in measured), default=None)
        grad = max((r["gradient_error"] for r in measured), default=None)
        took = ", ".join(sorted({r["took"] for r in measured}))
        cells = [f"{e:.1e}" if e is not None else "" for e in (out, grad)]
        lines.append(f"| {path} | {precision} | {len(group)} | {failed} | {cells[0]} | {cells[1]} | {took} |")
    failures = [
        f"- FAIL {r['case']} · {r['path']} · {r['precision']} · call {r['call']}: "
        + (
            r.get("error")
            or f"output {r['output_error']:.1e}, gradient {r['gradient_error']:.1e} ({r['worst_gradient']})"
        )
        for r in rows
        if not r["pass"]
    ]
    return [*lines, "", *failures, *([""] if failures else [])]


def overhead_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per token count and slot value: the path taken, images/s, overhead over no PE, peak memory."""
    lines = [
        "| tokens | batch | case | took | img/s | overhead (min to max) | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        over = _percent(r) if "overhead" in r else "baseline"
        peak = "" if r.get("peak_bytes") is None else f"{r['peak_bytes'] / 2**30:.2f} GiB"
        if r.get("peak_ratio") is not None:
            peak += f" ×{r['peak_ratio']:.2f}"
        lines.append(
            f"| {r['tokens']} | {r['batch']} | {r['case']} | {r['took']} | {r['images_per_s']:.1f} | {over} | {peak} |"
        )
    return [*lines, ""]


def against_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per model pair (compiled DeiT-S, Swin-T): time over the other's."""
    lines = []
    for r in rows:
        how = "compiled" if r.get("compiled") else "eager"
        first = f"; first calls (compiling): {r['first_calls']}" if "first_calls" in r else ""
        lines.append(
            f"- {r['case']} ({r['took']}, {how}, batch {r['batch']}) against {r['against']}: step time "
            f"×{1 + r['overhead']:.3f} ({_percent(r)}); {r['images_per_s']:.1f} against "
            f"{r['baseline_images_per_s']:.1f} img/s{first}"
        )
    return lines


def policy_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows of the CUDA policy's table that the fastest paths propose, with their evidence."""
    proposed = proposed_rows(rows)
    if not proposed:
        return []
    lines = ["Rows of `CUDA_TABLE` (`vitpos/attention/policy.py`) these timings propose:", ""]
    for (kind, dtype, tokens), (path, evidence) in sorted(proposed.items()):
        lines.append(f'- `("{kind}", "{dtype}", "{tokens}"): "{path}"` — {evidence}')
    return [*lines, ""]


def ensemble_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Part (vii): member steps/s per family, stack size and compile mode; stacks in flight; the projections."""
    lines = [
        "| family | members | compile | member steps/s (min to max) | first call |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for r in (r for r in rows if "compile" in r and "member_steps_per_s" in r):
        first = f"{r['first_call_s']:.1f} s" if r.get("first_call_s") is not None else ""
        rate = f"{r['member_steps_per_s']:.0f} ({r['low']:.0f} to {r['high']:.0f})"
        lines.append(f"| {r['family']} | {r['members']} | {r['compile']} | {rate} | {first} |")
    lines.append("")
    for r in (r for r in rows if "stacks" in r):
        lines.append(
            f"- {r['stacks']} stack(s) of {r['members']} in flight ({r['how']}): {r['member_steps_per_s']:.0f}"
        )
    for r in (r for r in rows if "projection" in r):
        of = f"{len(r['families'])} of {r['of']} families"
        lines.append(
            f"- projected {r['projection']} ({of}, compile {r['compile']}): {r['projected_min']:.1f} min ({r['how']})"
        )
    for r in (r for r in rows if "task" in r and "projected_min" in r):
        lines.append(f"- projected `--task {r['task']}`: {r['projected_min']:.1f} min ({r['how']})")
    return [*lines, ""]


def render(data: dict[str, Any], heading: str = HEADING) -> str:
    """The whole section under ``heading`` from the JSON of a run."""
    rows = data["rows"]
    versions = ", ".join(f"{k} {data.get(k) or 'not installed'}" for k in ("torch", "triton", "timm", "kornia"))
    lines = [heading, "", f"- Device: {data['device']}; {versions}", f"- Command: `{data['command']}`"]
    if data.get("dynamo"):
        lines.append(f"- Dynamo: {', '.join(f'{k} {v}' for k, v in data['dynamo'].items())}")
    if not data.get("finished"):
        lines.append("- The run was cut short: these are the rows it wrote before the cut.")
    lines.append("")

    def part(name: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["part"] == name and "skipped" not in r and not ("error" in r and "case" not in r)]

    checks, overheads = part("correctness"), part("overhead")
    paths = [r for r in overheads if "path" in r]
    others = [r for r in overheads if "path" not in r and "images_per_s" in r]  # not a first call alone
    if checks:
        lines += ["### Correctness against the float64 literal reference", "", *correctness_table(checks)]
    if paths:
        lines += ["### Every path of every bucketed term: bf16 training step over no PE (eager)", ""]
        lines += [*path_table(paths), *policy_lines(paths)]
    if others:
        lines += ["### bf16 training step over no PE (eager)", ""]
        lines += overhead_table(others)
    firsts = [r for r in overheads if "path" not in r and "images_per_s" not in r]
    if firsts:
        lines += ["First calls of the no-PE step (the baseline of the rows above):", ""]
        lines += [f"- {r['tokens']} tokens, {r['step']} step: {r['first_call_s']:.1f} s" for r in firsts] + [""]
    pairs = part("compiled") + part("swin")
    if pairs:
        lines += ["### Model against model", "", *against_lines(pairs), ""]
    for r in part("augment"):
        train = r.get("train_step_images_per_s")
        beside = f"; the training step ({r['train_step']}): {train:.1f} img/s" if train else ""
        lines += ["### Device-side augmentation", "", f"- {r['case']}: {r['images_per_s']:.1f} img/s{beside}", ""]
    data = part("data")
    if data:
        rates = [f"- {r['case']}: {r['images_per_s']:.1f} img/s" for r in data if "images_per_s" in r]
        lines += ["### The DeiT recipe end to end (folder and shards)", "", *rates]
        lines += [*(r["summary"] for r in data if "summary" in r), ""]
    stacks = part("ensemble")
    if stacks:
        lines += ["### The study's stacked ensembles", "", *ensemble_lines(stacks)]
    left_out = [
        f"- {r['part']}: " + (f"skipped {r['skipped']}: {r['reason']}" if "skipped" in r else f"failed: {r['error']}")
        for r in rows
        if "skipped" in r or ("error" in r and "case" not in r)
    ]
    if left_out:
        lines += ["### Left out", "", *left_out, ""]
    return "\n".join(lines)


def write_section(data: dict[str, Any], out: Path, heading: str = HEADING) -> None:
    """Replace the section under ``heading`` (the quick check's) of ``out`` (append it where there is none)."""
    text = out.read_text() if out.exists() else ""
    out.write_text(replace_section(text, render(data, heading), heading))


def _write_policy(path: Path, rows: list[dict[str, Any]], source: str) -> int:
    """Write the proposed rows into the CUDA_TABLE of ``path``; 2 with a message where it cannot."""
    try:
        path.write_text(write_policy(path.read_text(), rows, source))
    except (OSError, ValueError) as err:
        print(f"cannot write the policy's rows into {path}: {err}", file=sys.stderr)
        return 2
    print(f"wrote the measured rows of CUDA_TABLE in {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quick_report", description=__doc__)
    p.add_argument("rows", help="the JSON file of a `python -m bench.gpu --quick` run")
    p.add_argument("--out", default="", help="replace the quick check's section of this markdown file")
    p.add_argument("--table", action="store_true", help="print the rows of the CUDA policy's table it proposes")
    p.add_argument(
        "--policy",
        default="",
        help="with --table: write those rows into this file's CUDA_TABLE (vitpos/attention/policy.py)",
    )
    args = p.parse_args(argv)
    try:
        data = json.loads(Path(args.rows).read_text())
    except (OSError, ValueError) as err:
        print(f"cannot read the rows of {args.rows}: {err}; pass the --json file of a quick run", file=sys.stderr)
        return 2
    if not isinstance(data, dict) or not {"rows", "device", "command"} <= data.keys():
        print(
            f"{args.rows} holds no quick run's rows (no 'rows', 'device' and 'command'); pass its --json file",
            file=sys.stderr,
        )
        return 2
    if args.table:
        rows = [r for r in data["rows"] if r.get("part") == "overhead" and "path" in r and "overhead" in r]
        source = f"{args.rows} ({data['device']})"
        print("\n".join(table_lines(rows, source)))
        tunings = [r for r in data["rows"] if r.get("part") == "tuning"]
        if tunings:
            print("\n".join(pinned_lines(tunings)))
        if args.policy:
            return _write_policy(Path(args.policy), rows, source)
    elif args.out:
        write_section(data, Path(args.out))
    else:
        print(render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
