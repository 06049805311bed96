"""``vitpos models``: list presets with their position slots and parameter counts (``--pretrained``:
those with the authors' released weights, and where each file is published)."""

from __future__ import annotations

import argparse

import torch

from ..models.factory import TASKS, create_model, get_config, list_models
from ..weights.pretrained import RELEASES


def count_parameters(name: str) -> int:
    """Parameters of preset ``name``, counted on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        model = create_model(name)
    return sum(p.numel() for p in model.parameters())


def run(args: argparse.Namespace) -> int:
    names = [n for n in list_models(args.pattern, task=args.task) if not args.pretrained or n in RELEASES]
    if not names:
        kind = "model with released weights" if args.pretrained else "model"
        raise ValueError(f"no {kind} matches {args.pattern!r}; run 'vitpos models' for the full list")
    if args.pretrained:
        print(f"{'model':48s} {'params':>12s}  released weights (create_model(NAME, pretrained=True))")
        for name in names:
            print(f"{name:48s} {count_parameters(name):>12,d}  {RELEASES[name].url}")
        return 0
    header = f"{'model':48s} {'params':>12s}  absolute / join / conditional / relative"
    print(header)
    for name in names:
        pos = get_config(name).position
        slots = " / ".join((pos.absolute, pos.join, pos.conditional, pos.relative))
        print(f"{name:48s} {count_parameters(name):>12,d}  {slots}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list model presets", description="List model presets.")
    p.add_argument(
        "pattern", nargs="?", default="*", help="a part of the name (deit) or a shell-style filter ('cpvt*')"
    )
    p.add_argument("--task", choices=TASKS, help="only presets for this task (default: all)")
    p.add_argument(
        "--pretrained", action="store_true", help="only presets with the authors' released weights, with their URLs"
    )
    p.set_defaults(func=run)
