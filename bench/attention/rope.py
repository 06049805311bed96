"""``python -m bench.attention.rope``: RoPE's rotation of q and k, one complex step over both against rotating
each with real arithmetic (the form before it), DeiT-S shapes, one thread, float32."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch

from vitpos.attention.terms import Rotation


def rotate_apart(q: torch.Tensor, k: torch.Tensor, cos_sin: torch.Tensor, p: int) -> list[torch.Tensor]:
    """The baseline: each of q and k rotated on its own in real arithmetic, prefix tokens concatenated back."""
    cos, sin = cos_sin.unbind(0)
    out = []
    for x in (q, k):
        even, odd = x[..., p:, :].unflatten(-1, (-1, 2)).unbind(-1)
        cells = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
        out.append(torch.cat([x[..., :p, :], cells], dim=-2))
    return out


def median_ms(fn: Callable[[], object], repeats: int = 15, iters: int = 10) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - start) / iters * 1e3)
    return statistics.median(times)


def main() -> int:
    torch.set_num_threads(1)
    batch, heads, grid, d = 8, 6, 14, 64
    n = 1 + grid * grid
    q, k, _ = torch.randn(batch, n, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)  # views of one qkv, as in Attention
    cos_sin = torch.randn(2, 1, grid * grid, d // 2)
    rotation = Rotation(cos_sin, 1)
    for got, want in zip(rotation.apply(q, k), rotate_apart(q, k, cos_sin, 1), strict=True):
        torch.testing.assert_close(got, want)
    apart = median_ms(lambda: rotate_apart(q, k, cos_sin, 1))
    together = median_ms(lambda: rotation.apply(q, k))
    shape = f"({batch}, {heads}, {n}, {d})"
    print(f"q and k {shape}: apart {apart:.2f} ms, one step {together:.2f} ms, x{together / apart:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
