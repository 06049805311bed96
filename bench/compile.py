"""``python -m bench.compile``: every preset compiles with inductor at its grid and equals eager.

Each preset keeps its slots, patch size and grid; width and depth are reduced (``--heads`` heads
of ``--head-dim`` channels, ``--depth`` blocks, or the preset's own depth where a slot needs
more, e.g. PEGs after blocks 0-4), so the whole list compiles in minutes on 2 CPU cores rather
than hours. A training step (forward and backward) and an inference forward are compiled with
``fullgraph=True`` (no graph break is allowed) and compared with eager execution.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import vitpos


def reduced(name: str, heads: int, head_dim: int, depth: int) -> torch.nn.Module:
    """``name`` at reduced width, with ``depth`` blocks or the fewest its slots allow (e.g. PEGs
    after blocks 0-4 need five)."""
    width = dict(embed_dim=heads * head_dim, num_heads=heads)
    own_depth = vitpos.get_config(name).depth
    for blocks in range(min(depth, own_depth), own_depth):
        try:
            return vitpos.create_model(name, **width, depth=blocks)
        except ValueError:  # a placement or a LaPE eta beyond this depth
            continue
    return vitpos.create_model(name, **width)


def check(model: torch.nn.Module, images: torch.Tensor) -> tuple[float, float]:
    """Compile, run a training step and an inference forward; returns (seconds, max abs difference)."""
    start = time.perf_counter()
    compiled = torch.compile(model, fullgraph=True)
    model.train()
    out = compiled(images)
    out.square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(images)
    expected.square().mean().backward()
    diffs = [(out - expected).abs().max()] + [
        (g - p.grad).abs().max() for g, p in zip(grads, model.parameters(), strict=True)
    ]
    model.eval()
    with torch.no_grad():
        diffs.append((compiled(images) - model(images)).abs().max())
    return time.perf_counter() - start, max(d.item() for d in diffs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compile", description=__doc__)
    p.add_argument("pattern", nargs="?", default="", help="only presets whose name contains this")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest allowed difference to eager")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = [n for n in vitpos.list_models() if args.pattern in n]
    print("| preset | depth | width | grid | compile + run (s) | max abs diff to eager |")
    print("| --- | --- | --- | --- | --- | --- |")
    failed = []
    for name in names:
        torch._dynamo.reset()  # every preset runs the same forward code: start its compilations afresh
        torch.manual_seed(0)
        model = reduced(name, args.heads, args.head_dim, args.depth)
        cfg = model.cfg
        images = torch.randn(2, cfg.in_chans, cfg.img_size, cfg.img_size)
        try:
            seconds, diff = check(model, images)
            status = f"{seconds:.1f} | {diff:.1e}"
            if diff > args.tolerance:
                failed.append(name)
        except Exception as err:  # report every preset, then fail
            status = f"failed | {type(err).__name__}: {str(err).splitlines()[0][:120]}"
            failed.append(name)
        grid = "x".join(map(str, cfg.grid))
        print(f"| {name} | {cfg.depth} | {cfg.embed_dim} | {grid} | {status} |", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
