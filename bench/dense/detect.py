"""``python -m bench.dense.detect``: a DETR training step's time for each slot value, as a ratio to no PE.

The step is what ``vitpos train`` runs on detection data: forward of ``detr_tiny_sine`` with the
slots of the case, DETR's set loss (Hungarian matching per image, auxiliary layers), backward and
an AdamW step, on ``synthetic:detect`` images. Every case is timed in the same process as the
baseline (``absolute=none``, no other slot), in paired rounds (:func:`bench.timing.paired_overheads`).
``--out BENCHMARKS.md`` replaces the report's detection section.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

import vitpos
from vitpos.data.synthetic_detect import SyntheticDetection

from ..gpu.report import replace_section
from ..timing import Timing, paired_overheads

HEADING = "## DETR training step per slot value (CPU)"
BASELINE = "none"
CASES: dict[str, dict[str, str]] = {
    "none": dict(absolute="none"),
    "sine (detr join)": dict(absolute="sine"),
    "learned (detr join)": dict(absolute="learned"),
    "sine (input join)": dict(absolute="sine", join="input"),
    "peg@0": dict(absolute="none", conditional="peg@0"),
    "rope2d": dict(absolute="none", relative="rope2d"),
    "sine + irpe bias 9x9": dict(absolute="sine", relative="irpe:product:bias:k:ratio=2"),
    "irpe ctx 9x9": dict(absolute="none", relative="irpe:product:ctx:k:ratio=2"),
    "sine + irpe ctx 9x9": dict(absolute="sine", relative="irpe:product:ctx:k:ratio=2"),
    "sine + irpe ctx 9x9 clip": dict(absolute="sine", relative="irpe:product:ctx:k:ratio=2:clip"),
}
"""Slot values on ``detr_tiny_sine`` (join ``detr`` unless a case names another)."""


def training_step(slots: dict[str, str], side: int, batch: int) -> Callable[[], None]:
    """One detection training step of ``detr_tiny_sine`` with ``slots`` on ``side`` x ``side`` images."""
    torch.manual_seed(0)
    model = vitpos.create_model("detr_tiny_sine", img_size=side, **slots).train()
    split = SyntheticDetection(img_size=side, train=batch).render("train")
    images, targets = split.images.float() / 255, split.targets
    criterion = model.criterion()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        loss = criterion(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def fmt(t: Timing, baseline: bool) -> str:
    return "baseline" if baseline else f"{t.median:+.1%} ({t.low:+.1%} to {t.high:+.1%})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dense.detect", description=__doc__)
    p.add_argument(
        "--sizes", default="32,128", help="comma-separated image sides (stride 4: 32 -> 64 tokens, 128 -> 1,024)"
    )
    p.add_argument("--batch", type=int, default=8, help="images per step at the first size (scaled by area after it)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default="", help="write the section into this markdown file")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    stride = vitpos.get_config("detr_tiny_sine").stride
    header = "| Slot values | " + " | ".join(f"{s} px ({(s // stride) ** 2} tokens)" for s in sizes) + " |"
    columns: list[dict[str, str]] = []
    for side in sizes:
        batch = max(1, round(args.batch * (sizes[0] / side) ** 2))
        steps = {label: training_step(slots, side, batch) for label, slots in CASES.items()}
        throughput, overheads = paired_overheads(
            steps, BASELINE, batch, warmup=args.warmup, repeats=args.repeats, iters=1
        )
        column = {label: fmt(overheads[label], label == BASELINE) for label in CASES}
        column[BASELINE] += f": {throughput[BASELINE].median:.1f} img/s, batch {batch}"
        columns.append(column)
        print(f"{side} px done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    command = "python -m bench.dense.detect " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    lines = [
        HEADING, "",
        f"`{command.strip()}` — CPU only ({os.cpu_count()} cores, torch {torch.__version__}, "
        f"{args.threads} thread(s)), {args.repeats} paired rounds, {time.perf_counter() - started:.0f} s. "
        "One training step of `detr_tiny_sine` (stem, 2 encoder + 2 decoder layers, width 64, 8 queries) "
        "with the slot values of each row: forward, DETR's set loss with Hungarian matching and auxiliary layers, "
        "backward, AdamW. Time over the no-PE baseline measured beside it, minus one: median (min to max) over "
        "rounds. No GPU figure: none was measured.", "",
        header, "|---|" + "---|" * len(sizes),
        *(f"| {label} | " + " | ".join(c[label] for c in columns) + " |" for label in CASES),
    ]  # fmt: skip
    section = "\n".join(lines) + "\n"
    print(section)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section, HEADING))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
