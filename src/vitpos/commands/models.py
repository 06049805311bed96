"""``vitpos models``: list presets with their position slots and parameter counts."""

from __future__ import annotations

import argparse

import torch

from ..models.factory import TASKS, create_model, get_config, list_models


def count_parameters(name: str) -> int:
    """Parameters of preset ``name``, counted on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        model = create_model(name)
    return sum(p.numel() for p in model.parameters())


def run(args: argparse.Namespace) -> int:
    names = list_models(args.pattern, task=args.task)
    if not names:
        raise ValueError(f"no model matches {args.pattern!r}; run 'vitpos models' for the full list")
    header = f"{'model':48s} {'params':>12s}  absolute / join / conditional / relative"
    print(header)
    for name in names:
        pos = get_config(name).position
        slots = " / ".join((pos.absolute, pos.join, pos.conditional, pos.relative))
        print(f"{name:48s} {count_parameters(name):>12,d}  {slots}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list model presets", description="List model presets.")
    p.add_argument("pattern", nargs="?", default="*", help="shell-style filter, e.g. 'cpvt*'")
    p.add_argument("--task", choices=TASKS, help="only presets for this task (default: all)")
    p.set_defaults(func=run)
