"""The GPU section of BENCHMARKS.md: its cases, its table and its place in the file (no CUDA needed)."""

from __future__ import annotations

from dataclasses import dataclass

from vitpos.attention import PATHS

from ..cases import BASELINE, CASES, Case

HEADING = "## GPU"
NOT_MEASURED = (
    f"{HEADING}\n\nThe full `python -m bench.gpu` has not run on a GPU yet: `python -m bench.gpu --out BENCHMARKS.md` "
    "on a machine with CUDA writes this section (device, torch version, command, bf16 autocast training and "
    "inference overheads of every slot value on DeiT-S at 196 and 784 tokens, eager and compiled, peak memory, "
    "every bucketed term on every attention path that computes it (the fused `triton` path against no PE and "
    "against the best other path), and vitpos against timm's DeiT-S and Swin-T when timm is installed). The "
    "short check (`--quick`) writes a section of its own.\n"
)


@dataclass(frozen=True)
class GpuGroup:
    """One paired comparison: every case at ``tokens`` in ``mode`` ('train' or 'infer'), eager or compiled."""

    tokens: int
    mode: str
    compiled: bool

    @property
    def title(self) -> str:
        mode = "training step" if self.mode == "train" else "inference"
        return f"{self.tokens} tokens, {mode}, {'compiled' if self.compiled else 'eager'}"


def gpu_groups(tokens: tuple[int, ...] = (196, 784), compiled: tuple[bool, ...] = (False, True)) -> list[GpuGroup]:
    """Every (tokens, mode, eager/compiled) comparison the GPU benchmark runs."""
    return [GpuGroup(t, mode, c) for t in tokens for c in compiled for mode in ("train", "infer")]


def gpu_cases() -> list[Case]:
    """Every available slot value of the CPU benchmark, the no-PE baseline first."""
    return [BASELINE] + [c for c in CASES if c is not BASELINE and c.available()]


PATH_TERMS = ("iRPE bias product", "iRPE ctx k", "iRPE ctx qk", "iRPE ctx qkv", "Swin bias")
"""The cases with bucketed terms, timed on every attention path."""
FUSED = "triton"
SEPARATOR = " · "


def path_cases() -> list[tuple[Case, str]]:
    """Every (bucketed case, attention path) pair to time; the explicit softmax is never a contender."""
    return [(c, p) for c in CASES if c.label in PATH_TERMS and c.available() for p in PATHS if p != "explicit"]


def path_label(term: str, path: str) -> str:
    """The row label of the case labelled ``term`` on ``path``."""
    return f"{term}{SEPARATOR}{path}"


@dataclass(frozen=True)
class GpuRow:
    """One measured case of one group: images/s, overhead against the group's baseline (median,
    min, max over rounds) and peak CUDA memory of a training step (bytes, None in inference)."""

    label: str
    images_per_s: float
    overhead: tuple[float, float, float]
    peak_bytes: int | None = None


def render_table(group: GpuGroup, rows: list[GpuRow], baseline: str) -> list[str]:
    """Markdown lines of one group's table."""
    lines = [
        f"### {group.title}",
        "",
        "| case | img/s | overhead (min to max) | peak memory |",
        "| --- | --- | --- | --- |",
    ]
    base_peak = next((r.peak_bytes for r in rows if r.label == baseline), None)
    for r in rows:
        median, low, high = r.overhead
        over = "baseline" if r.label == baseline else f"{median:+.1%} ({low:+.1%} to {high:+.1%})"
        memory = ""
        if r.peak_bytes is not None:
            memory = f"{r.peak_bytes / 2**30:.2f} GiB" + (f" ×{r.peak_bytes / base_peak:.2f}" if base_peak else "")
        lines.append(f"| {r.label} | {r.images_per_s:.1f} | {over} | {memory} |")
    return [*lines, ""]


def fused_against_best_other(rows: list[GpuRow]) -> dict[str, str]:
    """Per fused row: its step time over that of the fastest other path of the same term, naming it."""
    by_term: dict[str, dict[str, float]] = {}
    for r in rows:
        term, separator, path = r.label.rpartition(SEPARATOR)
        if separator:
            by_term.setdefault(term, {})[path] = r.images_per_s
    out = {}
    for term, speeds in by_term.items():
        others = {p: ips for p, ips in speeds.items() if p != FUSED}
        if FUSED in speeds and others:
            best = max(others, key=others.__getitem__)
            out[path_label(term, FUSED)] = f"×{others[best] / speeds[FUSED]:.2f} ({best})"
    return out


def render_path_table(group: GpuGroup, rows: list[GpuRow], baseline: str) -> list[str]:
    """Markdown lines of one group's attention-path table: :func:`render_table` with, for the fused
    rows, the step time over the best other path's (below 1: the fused path is faster)."""
    lines = render_table(group, rows, baseline)
    lines[0] += ": every path of the bucketed terms"
    lines[2] = lines[2].rstrip() + " time × best other path |"
    lines[3] += " --- |"
    ratios = fused_against_best_other(rows)
    for i, r in enumerate(rows, start=4):
        lines[i] += f" {ratios.get(r.label, '')} |"
    return lines


def render_section(device: str, torch_version: str, command: str, batch: int, tables: list[list[str]]) -> str:
    """The whole GPU section: what was run, on what, and the tables."""
    head = [
        HEADING,
        "",
        f"- Device: {device}; torch {torch_version}",
        f"- Command: `{command}`",
        f"- Settings: bf16 autocast, batch {batch} at 196 tokens (scaled by 196 / tokens), AdamW training "
        "steps; overheads paired against the baseline timed beside them (see the CPU settings above); "
        "peak memory from `torch.cuda.max_memory_allocated` over one training step.",
        "",
    ]
    return "\n".join(head + [line for table in tables for line in table])


def replace_section(text: str, section: str, heading: str = HEADING) -> str:
    """``text`` with its section under ``heading`` (default: the GPU section; up to the next '## '
    heading) replaced by ``section``, or ``section`` appended where there is none."""
    start = text.find(f"\n{heading}\n")
    if start < 0:
        return text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    end = text.find("\n## ", start + 1)
    rest = "" if end < 0 else text[end:]
    return text[: start + 1] + section.rstrip("\n") + "\n" + rest


def gpu_section(text: str, heading: str = HEADING) -> str | None:
    """The section of ``text`` under ``heading`` (default: the GPU section), or None."""
    start = text.find(f"\n{heading}\n")
    if start < 0:
        return None
    end = text.find("\n## ", start + 1)
    return text[start + 1 : None if end < 0 else end].rstrip("\n") + "\n"
