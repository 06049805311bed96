"""``python -m bench.attention.caches``: what each per-grid cache saves in an eval forward pass.

For every case an eval forward (batch 1, ``torch.no_grad``) of ``deit_small_patch16_224`` (and
``swin_tiny`` for the window masks) is timed three ways, interleaved in every round:

* ``cached`` — the library as it is;
* ``no module caches`` — every :class:`~vitpos.grid.GridCache` held by a module of
  the model replaced by a pass-through (each call recomputes), the shared bucket-id cache kept;
* ``no caches`` — the bucket-id cache bypassed as well.

Each round times ``--repeats`` forwards of each variant after a warm-up and keeps the fastest
(the least disturbed on a shared machine); a variant's ratio is that time over the cached
variant's in the same round. Reported: the median ratio over
the rounds with the smallest and largest round, at the native grid (224 px: 196 tokens for
DeiT-S) and at a larger one (288 px). On a shared machine these ratios carry the machine's noise
(the ``no PE`` case, whose join caches nothing, shows it), so each uncached variant also
reports "recomputing": the time spent inside the bypassed caches' computations, as a share of
the same forward's time (median over the rounds) — what those caches can save at most.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import torch
from torch import nn

import vitpos
from vitpos.grid import GridCache

CASES: tuple[tuple[str, str, dict], ...] = (
    ("no PE", "deit_small_patch16_224", {"absolute": "none"}),
    ("learned", "deit_small_patch16_224", {"absolute": "learned"}),
    ("sincos2d", "deit_small_patch16_224", {"absolute": "sincos2d"}),
    ("learnable_sincos", "deit_small_patch16_224", {"absolute": "learnable_sincos"}),
    ("fourier", "deit_small_patch16_224", {"absolute": "fourier"}),
    ("unshared join", "deit_small_patch16_224", {"absolute": "learned", "join": "unshared"}),
    ("LaPE", "deit_small_patch16_224", {"absolute": "learned", "join": "lape"}),
    ("iRPE bias qk", "deit_small_patch16_224", {"absolute": "none", "relative": "irpe:product:bias:qk"}),
    ("iRPE ctx k", "deit_small_patch16_224", {"absolute": "none", "relative": "irpe:product:ctx:k"}),
    ("Swin bias", "deit_small_patch16_224", {"absolute": "none", "relative": "swin"}),
    ("LaPE + Swin bias", "deit_small_patch16_224", {"absolute": "learned", "join": "lape", "relative": "swin"}),
    ("RoPE 2-D axial", "deit_small_patch16_224", {"absolute": "none", "relative": "rope2d"}),
    ("RoPE 2-D mixed", "deit_small_patch16_224", {"absolute": "none", "relative": "rope2d:mixed"}),
    ("swin_tiny (window masks and Swin bias)", "swin_tiny", {}),
    ("swin_tiny, no relative (window masks)", "swin_tiny", {"relative": "none"}),
)
SIZES = (224, 288)
VARIANTS = ("cached", "no module caches", "no caches")


class PassThrough:
    """Stands in for a :class:`GridCache`: every call computes, and the time spent computing is
    added to ``clock[0]`` (shared by every stand-in of one variant; ``clock[1]`` marks a
    computation in progress, so that nested ones are counted once)."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def get(self, key, compute: Callable[[], torch.Tensor], params=()) -> torch.Tensor:
        if self.clock[1]:  # inside another stand-in's computation, which counts this time already
            return compute()
        self.clock[1] = 1
        start = time.perf_counter()
        try:
            return compute()
        finally:
            self.clock[0] += time.perf_counter() - start
            self.clock[1] = 0


def _bucket_module():
    """The module holding the shared bucket-id cache (``relative.buckets``; ``relative.index`` before its rename)."""
    for name in ("vitpos.encodings.relative.buckets", "vitpos.encodings.relative.index"):
        with contextlib.suppress(ModuleNotFoundError):
            return importlib.import_module(name)
    raise ModuleNotFoundError("no bucket-id module found")


@contextlib.contextmanager
def variant(model: nn.Module, name: str, clock: list[float]) -> Iterator[None]:
    """Run the model as ``name`` says (see the module docstring), restoring it afterwards; the
    time spent recomputing what the bypassed caches would hold accumulates in ``clock[0]``."""
    swapped: list[tuple[object, str, GridCache]] = []
    if name != "cached":
        for module in model.modules():
            for attr, value in list(vars(module).items()):
                if isinstance(value, GridCache):
                    swapped.append((module, attr, value))
                    setattr(module, attr, PassThrough(clock))
    buckets = _bucket_module()
    ids_cache = buckets._BUCKET_IDS
    if name == "no caches":
        buckets._BUCKET_IDS = PassThrough(clock)
    try:
        yield
    finally:
        buckets._BUCKET_IDS = ids_cache
        for module, attr, value in swapped:
            setattr(module, attr, value)


def count_caches(model: nn.Module) -> int:
    """GridCache instances held by the model's modules."""
    return sum(isinstance(v, GridCache) for m in model.modules() for v in vars(m).values())


def time_forward(model: nn.Module, images: torch.Tensor, repeats: int, clock: list[float]) -> tuple[float, float]:
    """The fastest of ``repeats`` forwards (on a shared machine the least disturbed one), and the
    share of that forward's time spent recomputing (``clock``)."""
    best = (float("inf"), 0.0)
    for _ in range(repeats):
        clock[0] = 0.0
        start = time.perf_counter()
        model(images)
        elapsed = time.perf_counter() - start
        best = min(best, (elapsed, clock[0] / elapsed))
    return best


def measure(model_name: str, slots: dict, size: int, rounds: int, repeats: int) -> dict[str, list[float]]:
    """Per variant, its time over the cached variant's, one ratio per round; plus the cached ms."""
    torch.manual_seed(0)
    model = vitpos.create_model(model_name, **slots).eval()
    images = torch.randn(1, 3, size, size)
    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
    clock = [0.0, 0]
    with torch.no_grad():
        for r in range(rounds):
            order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]  # rotate who goes first
            times, shares = {}, {}
            for v in order:
                with variant(model, v, clock):
                    model(images)  # warm-up: fills the caches this variant keeps
                    times[v], shares[v] = time_forward(model, images, repeats, clock)
            for v in VARIANTS:
                ratios[v].append(times[v] / times["cached"])
            ratios.setdefault("cached ms", []).append(times["cached"] * 1e3)
            for v in VARIANTS[1:]:
                ratios.setdefault(f"{v} share", []).append(shares[v])
    ratios["caches"] = [count_caches(model)]
    return ratios


def spread(values: list[float]) -> str:
    return f"x{statistics.median(values):.3f} (x{min(values):.3f}–x{max(values):.3f})"


def share(values: list[float]) -> str:
    return f"{100 * statistics.median(values):.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="case labels to run (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"# {platform.processor() or platform.machine()}; torch {torch.__version__}; threads {args.threads}; "
        f"batch 1, float32, eval, no_grad; rounds {args.rounds} x {args.repeats} forwards"
    )
    print(
        "| case | image | tokens | module caches | cached ms "
        "| no module caches | recomputing | no caches | recomputing |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, model_name, slots in CASES:
        if args.only and label not in args.only:
            continue
        for size in SIZES:
            r = measure(model_name, slots, size, args.rounds, args.repeats)
            tokens = (size // 16) ** 2 if model_name.startswith("deit") else (size // 4) ** 2  # Swin: stage 0
            print(
                f"| {label} | {size} | {tokens} | {r['caches'][0]} | {statistics.median(r['cached ms']):.1f} | "
                f"{spread(r['no module caches'])} | {share(r['no module caches share'])} | "
                f"{spread(r['no caches'])} | {share(r['no caches share'])} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
