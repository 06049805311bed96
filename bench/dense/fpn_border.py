"""``python -m bench.dense.fpn_border``: does the Semantic FPN's zero padding tell a segmenter where it is?

CPVT's Table 13 gap (PEG and learned tables over no encoding) did not show on
``synthetic:segment_absolute``, where the class of a square depends on the image half it lies in:
every encoding, none included, reached about 98 mIoU. The suspected cause is the FPN's
zero-padded 3x3 convolutions, which can read absolute position from the border. This trains the
same small PVT-FPN with each encoding (learned tables, PEG, none) and each ``conv_padding`` of
the neck and head (``zeros``, ``circular``: no border to read), over seeds, and prints test mIoU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from vitpos.engine import RunRequest
from vitpos.engine.train import train

ENCODINGS = {
    "learned": ("pvt_tiny_fpn", {}),
    "peg": ("pvt_tiny_peg_gap_fpn", {}),
    "none": ("pvt_tiny_gap_fpn", {"absolute": "none"}),
}
"""The three rows of the README's small Table 13: preset and slot overrides."""
SMALL = dict(
    embed_dims=(16, 32, 64, 128), num_heads=(1, 2, 4, 8), mlp_ratios=(4.0, 4.0, 4.0, 4.0),
    fpn_dim=64, head_dim=32, norm_groups=8,
)  # fmt: skip
"""The README's 0.94M-parameter PVT-FPN."""


def run(encoding: str, padding: str, seed: int, args: argparse.Namespace) -> float:
    """Test mIoU of one training run."""
    preset, slots = ENCODINGS[encoding]
    sizes = f"img={args.img}:square=8:train={args.train}:val={args.val}:test={args.test}"
    data = f"synthetic:segment_absolute:{sizes}:seed={seed}"
    options = {"data": data, "epochs": args.epochs, "batch_size": 32, "lr": 2e-3, "seed": seed,
               "progress": False, "device": "cpu", "run_dir": None}  # fmt: skip
    if args.warmup_epochs is not None:
        options["warmup_epochs"] = args.warmup_epochs
    host = {"patch_size": args.patch_size} | ({"sr_ratios": None} if args.full_attention else {})
    request = RunRequest(preset, {**SMALL, **host, **slots, "conv_padding": padding}, options)
    return train(*request.resolve()).test["miou"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.dense.fpn_border", description=__doc__)
    p.add_argument("--img", type=int, default=32, help="image side in pixels (squares stay 8 pixels)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--train", type=int, default=500)
    p.add_argument("--warmup-epochs", type=float, help="learning-rate warm-up (default: the trainer's)")
    p.add_argument("--val", type=int, default=100)
    p.add_argument("--test", type=int, default=500)
    p.add_argument("--paddings", default="zeros,circular")
    p.add_argument("--encodings", default=",".join(ENCODINGS))
    p.add_argument("--patch-size", type=int, default=4, help="the host's first stride (2: no map shrinks to 1 cell)")
    p.add_argument("--full-attention", action="store_true", help="no spatial reduction of keys (sr_ratios=None)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    attention = "full attention" if args.full_attention else "spatial reduction 8-4-2-1"
    print(f"{args.img}x{args.img} px, patch {args.patch_size}, {attention}, {args.train} images, {args.epochs} epochs")
    print("| encoding | conv_padding | test mIoU per seed | mean |\n|---|---|---|---|")
    start = time.process_time()
    for padding in args.paddings.split(","):
        for encoding in args.encodings.split(","):
            scores = [run(encoding, padding, seed, args) for seed in range(args.seeds)]
            per_seed = ", ".join(f"{s:.1f}" for s in scores)
            print(f"| {encoding} | {padding} | {per_seed} | {statistics.mean(scores):.1f} |", flush=True)
    print(f"\n{time.process_time() - start:.0f} CPU-seconds")


if __name__ == "__main__":
    main()
