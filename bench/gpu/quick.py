"""``python -m bench.gpu --quick``: a GPU check sized for one short call. Its parts stop at
``--budget`` seconds (240 by default, leaving a minute of a five-minute call to start the machine
and import torch), compiling and autotuning included.

Seven parts, each with a share of ``--budget`` seconds (:data:`SHARES`; time a part leaves goes to
the later ones): (i) correctness of every bucketed encoding on every attention path
(:mod:`bench.gpu.check`); (ii) bf16 training-step overhead over no PE, eager: every bucketed term
on every path that computes it, first calls timed apart, the fastest marked (:mod:`bench.gpu.path_rows`;
the rows of the CUDA policy's table they propose are printed last), then every other slot value
with the path it took; (iii) compiled DeiT-S with iRPE ctx k against compiled timm
DeiT-S; (iv) ``swin_tiny`` against timm's Swin-T; (v) the DeiT recipe's device-side
augmentation in images/s beside the training step's; (vi) ``vitpos train --recipe deit`` as run on
a JPEG folder and its shards against the bare step (:mod:`bench.gpu.quick_data`); (vii) the study's
stacked ensembles: member steps/s, stacks in flight, the projected study times, the compiled step
(:mod:`bench.quick_ensemble`). A progress line
with the time elapsed and left goes to stderr per row; every row goes to ``--json`` as soon as
it is measured, so a call cut short still leaves its rows. Exit status 1 if a correctness row
fails.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import platform
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import torch

from ..quick_log import Budget, RowLog
from ..quick_report import write_section
from ..quick_settings import QuickSettings
from .check import PART as CORRECTNESS
from .check import check_rows
from .check_layers import CheckCase, check_cases
from .path_report import table_lines
from .quick_parts import compiled_rows, overhead_rows, swin_rows

SHARES = {
    CORRECTNESS: 0.25,
    "overhead": 0.33,
    "compiled": 0.09,
    "swin": 0.05,
    "augment": 0.04,
    "data": 0.08,
    "ensemble": 0.16,
}
"""Each part's share of the budget, in the order the parts run."""
DEFAULT_JSON = Path("runs/bench/gpu_quick.json")


def versions() -> dict[str, str | None]:
    """The installed versions of torch and of the optional packages the check uses."""
    out: dict[str, str | None] = {"torch": torch.__version__}
    for name in ("triton", "timm", "kornia"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})"


def settings_dict(s: QuickSettings) -> dict[str, Any]:
    return {**dataclasses.asdict(s), "device": str(s.device)}


def selected_cases(labels: tuple[str, ...]) -> list[CheckCase]:
    """The correctness cases labelled ``labels`` (all for none); a ValueError lists the valid labels."""
    cases = check_cases()
    by_label = {c.label: c for c in cases}
    unknown = [label for label in labels if label not in by_label]
    if unknown:
        raise ValueError(f"unknown check case {', '.join(map(repr, unknown))}; valid cases: {', '.join(by_label)}")
    return [by_label[label] for label in labels] if labels else cases


def selected_parts(text: str) -> tuple[str, ...]:
    """The parts named in comma-separated ``text`` (empty: all), in the order they run."""
    names = tuple(filter(None, text.split(",")))
    unknown = [n for n in names if n not in SHARES]
    if unknown:
        raise ValueError(f"unknown part {', '.join(map(repr, unknown))}; parts: {', '.join(SHARES)}")
    return tuple(p for p in SHARES if p in names)


def run_quick(s: QuickSettings, path: Path, command: str, stream: TextIO | None = None) -> int:
    """Run every part within ``s.budget_s`` seconds, rows to ``path``; 1 if a correctness row fails."""
    header = {"command": command, "device": device_name(s.device), **versions(), "settings": settings_dict(s)}
    log = RowLog(path, header)
    chosen = s.parts or tuple(SHARES)
    budget = Budget(s.budget_s, {part: SHARES[part] for part in chosen}, stream)
    budget.progress(f"rows go to {path}")
    rates: dict[int, float] = {}

    def overhead() -> None:
        rates.update(overhead_rows(s, budget, log))

    def augment() -> None:
        from .quick_data import augment_rows  # the data modules import scikit-learn: only where they run

        augment_rows(s, budget, log, rates)

    def data() -> None:
        from .quick_data import data_rows

        data_rows(s, budget, log)

    def ensemble() -> None:
        from ..quick_ensemble import ensemble_rows  # the study imports scikit-learn and matplotlib

        ensemble_rows(s, budget, log, s.ensemble_members)

    parts: dict[str, Callable[[], None]] = {
        CORRECTNESS: lambda: check_rows(s.check, s.device, budget, log, selected_cases(s.cases)),
        "overhead": overhead,
        "compiled": lambda: compiled_rows(s, budget, log),
        "swin": lambda: swin_rows(s, budget, log),
        "augment": augment,
        "data": data,
        "ensemble": ensemble,
    }
    for part, run in parts.items():
        if part not in chosen:
            continue
        try:
            run()
        except Exception as err:  # a part that fails says so; the later parts still run
            log.add({"part": part, "error": f"{type(err).__name__}: {err}"[:500]})
            budget.progress(f"{part}: FAILED: {type(err).__name__}: {err}")
    log.finish()
    print("\n".join(summary(log.rows)))
    path_rows = [r for r in log.rows if r["part"] == "overhead" and "path" in r]
    print("\n".join(table_lines(path_rows, f"{path} ({header['device']})")))
    return 1 if any(r["part"] == CORRECTNESS and r.get("pass") is False for r in log.rows) else 0


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """A few lines for the console: correctness counts and failures, and every other row in brief."""
    checked = [r for r in rows if r["part"] == CORRECTNESS and "pass" in r]
    failed = [r for r in checked if not r["pass"]]
    lines = [f"{CORRECTNESS}: {len(checked)} calls checked, {len(failed)} failed"]
    lines += [
        f"  FAIL {r['case']} · {r['path']} · {r['precision']} · call {r['call']}: "
        + (r.get("error") or f"output {r['output_error']:.1e}, gradient {r['gradient_error']:.1e}")
        for r in failed
    ]
    for r in rows:
        if "skipped" in r or ("error" in r and "call" not in r):
            lines.append(
                f"{r['part']}: " + (f"skipped {r['skipped']}: {r['reason']}" if "skipped" in r else r["error"])
            )
        elif r["part"] != CORRECTNESS:
            lines.append(f"{r['part']}: " + json.dumps({k: v for k, v in r.items() if k != "part"}))
    return lines


def main(s: QuickSettings, json_path: str, argv: list[str], out: str = "") -> int:
    """The ``--quick`` entry point of :mod:`bench.gpu`; ``out``: a markdown file whose quick-check
    section the rows replace."""
    path = Path(json_path) if json_path else DEFAULT_JSON
    status = run_quick(s, path, shlex.join(["python", "-m", "bench.gpu", *argv]), sys.stderr)
    if out:
        write_section(json.loads(path.read_text()), Path(out))
    return status
