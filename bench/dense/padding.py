"""``python -m bench.dense.padding``: what a padding mask costs in an eval forward pass.

Every case is an eval forward (``torch.no_grad``) of a batch of two 224 x 224 images, timed three
ways, interleaved in every round: ``no mask`` (the batch as it is), ``empty mask`` (a
``padding_mask`` with no padded pixel: the masks and per-image encodings at one valid size) and
``padded`` (the second image's last 64 rows padding: two valid sizes, each image's encodings
computed at its own). Each round keeps the fastest of ``--repeats`` forwards of each variant; a
variant's ratio is its time over ``no mask``'s in the same round; reported is the median over the
rounds.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

import vitpos

CASES = (
    ("DeiT-S, learned", "deit_small_patch16_224", {}),
    ("CPVT-S-GAP (PEG)", "cpvt_s_gap", {}),
    ("DeiT-S, iRPE ctx", "deit_small_patch16_224", {"absolute": "none", "relative": "irpe:product:ctx:qkv"}),
    ("PVT-Tiny", "pvt_tiny", {}),
    ("Swin-T", "swin_tiny", {}),
)


def fastest(model, x, mask, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        model(x) if mask is None else model(x, padding_mask=mask)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(2, 3, 224, 224)
    empty = torch.zeros(2, 224, 224, dtype=torch.bool)
    padded = empty.clone()
    padded[1, 160:] = True
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{'case':22s} {'empty mask':>11s} {'padded':>8s}  (time / no mask's, median of {args.rounds} rounds)")
    for label, name, slots in CASES:
        model = vitpos.create_model(name, **slots).eval()
        ratios: dict[str, list[float]] = {"empty": [], "padded": []}
        with torch.no_grad():
            fastest(model, x, padded, 1)  # warm-up
            for _ in range(args.rounds):
                base = fastest(model, x, None, args.repeats)
                ratios["empty"].append(fastest(model, x, empty, args.repeats) / base)
                ratios["padded"].append(fastest(model, x, padded, args.repeats) / base)
        print(f"{label:22s} {statistics.median(ratios['empty']):11.3f} {statistics.median(ratios['padded']):8.3f}")


if __name__ == "__main__":
    main()
