"""iRPE's efficient path against the literal reference: one attention layer, time and peak memory.

The reference (``tests/encodings/relative/reference.py``, shared with the test suite) materialises every
r_ij as an (N, N, d) tensor and attends with einsum, as Eq. 15-17 read; vitpos looks buckets up
instead (iRPE §3.2), keeping the (B, heads, N, N) weights ("stored") or working through query
chunks ("chunked", the policy's choice from ``CHUNK_FROM_TOKENS`` tokens on).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tests.encodings.relative.reference import reference_attention
from vitpos import get_config
from vitpos.attention.policy import CHUNK_FROM_TOKENS
from vitpos.encodings.base import SlotContext
from vitpos.models.layers import Attention
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from .memory import PeakTensorMemory
from .timing import interleaved_throughput

PATHS = ("reference", "stored", "chunked")


@dataclass
class PathResult:
    """One path at one size: seconds per forward+backward (median, min, max), peak bytes, max |error|."""

    seconds: tuple[float, float, float] | None
    peak: int | None
    error: float | None
    note: str = ""


def build_layer(model: str, spec_text: str, num_prefix_tokens: int = 1) -> Attention:
    """One attention layer with ``model``'s width and heads and the relative encoding ``spec_text``,
    its tables filled with random values (they start at zero)."""
    cfg = get_config(model)
    spec = SlotSpec.parse(spec_text)
    ctx = SlotContext(cfg.embed_dim, cfg.num_heads, 1, cfg.grid, num_prefix_tokens)
    layer = Attention(cfg.embed_dim, cfg.num_heads, relative=RELATIVE.get(spec.name).from_spec(spec, ctx))
    with torch.no_grad():
        for p in layer.relative.parameters():
            p.normal_(std=0.1)
    return layer


def reference_bytes(layer: Attention, spec_text: str, tokens: int) -> int:
    """What the reference needs at least: per contextual target an (N, N, d) table plus einsum's
    per-head copy of it, in float32."""
    targets = next((f for f in SlotSpec.parse(spec_text).flags if f and set(f) <= set("qkv")), "k")
    return len(targets) * (layer.num_heads + 1) * tokens * tokens * layer.head_dim * 4


def _step(layer: Attention, path: str, spec_text: str, x: torch.Tensor, grid) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        inputs = x.detach().requires_grad_()
        if path == "reference":
            out = reference_attention(layer, spec_text, inputs, grid, 1, grid)
        else:
            layer.path = path
            out = layer(inputs, grid, 1)
        out.square().sum().backward()
        return out.detach()

    return run


def compare(
    model: str, spec_text: str, tokens: int, *, repeats: int, budget_bytes: int, seed: int = 0
) -> dict[str, PathResult]:
    """Time and memory of every path at ``tokens`` patch tokens (a square grid) plus a class token."""
    side = math.isqrt(tokens)
    if side * side != tokens:
        raise ValueError(f"{tokens} tokens is not a square grid")
    grid = (side, side)
    torch.manual_seed(seed)
    layer = build_layer(model, spec_text)
    x = torch.randn(1, tokens + 1, layer.num_heads * layer.head_dim)
    needed = reference_bytes(layer, spec_text, tokens + 1)
    paths = [p for p in PATHS if p != "reference" or needed <= budget_bytes]
    steps = {p: _step(layer, p, spec_text, x, grid) for p in paths}
    outputs, peaks = {}, {}
    for path, step in steps.items():
        step()  # bucket ids are built once per grid for a whole model, not per step: count them out
        with PeakTensorMemory() as counter:
            outputs[path] = step()
        peaks[path] = counter.peak
    timings = interleaved_throughput(steps, 1, warmup=0, repeats=repeats, iters=1, seed=seed)
    truth = outputs.get("reference")
    results = {}
    for path in PATHS:
        if path not in steps:
            note = f"not run: needs at least {needed / 2**30:.0f} GiB (N x N x d tables)"
            results[path] = PathResult(None, None, None, note)
            continue
        t = timings[path]  # images/s with one image per call: invert to seconds
        error = None if truth is None else (outputs[path] - truth).abs().max().item()
        results[path] = PathResult((1 / t.median, 1 / t.high, 1 / t.low), peaks[path], error)
    return results


def report(model: str, spec_text: str, token_counts: list[int], *, repeats: int, budget_gib: float) -> list[str]:
    """Markdown lines: one row per path and size, with ratios to the reference where it ran."""
    lines = [
        f"One attention layer of `{model}` with `{spec_text}`, batch 1, class token, forward + backward, "
        f"float32. `stored` keeps the N x N weights, `chunked` works through query chunks "
        f"(chosen automatically from {CHUNK_FROM_TOKENS} tokens on).",
        "",
        "| tokens | path | time per step (min–max) | × reference | peak memory | × reference "
        "| max abs diff to reference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    budget = int(budget_gib * 2**30)
    for tokens in token_counts:
        results = compare(model, spec_text, tokens, repeats=repeats, budget_bytes=budget)
        ref = results["reference"]
        for path, r in results.items():
            if r.seconds is None:
                row = f"| {tokens} | {path} | {r.note} | | | | |"
            else:
                median, low, high = r.seconds
                time_ratio = f"×{median / ref.seconds[0]:.3f}" if ref.seconds else ""
                mem_ratio = f"×{r.peak / ref.peak:.3f}" if ref.peak else ""
                error = "" if r.error is None else f"{r.error:.1e}"
                row = (
                    f"| {tokens} | {path} | {median * 1e3:.1f} ms ({low * 1e3:.1f}–{high * 1e3:.1f}) | {time_ratio} "
                    f"| {r.peak / 2**20:.1f} MiB | {mem_ratio} | {error} |"
                )
            print(row, flush=True)
            lines.append(row)
    return lines
