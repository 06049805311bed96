"""``vitpos models``: list presets with their position slots and parameter counts (``--pretrained``:
those with the authors' released weights, and where each file is published).

The listing reads :mod:`vitpos.commands.preset_table`, counted once from the registry (and the
released weights' URLs from :mod:`vitpos.weights.pretrained`), so it imports neither torch nor a
model; a test checks the table against the registry, and
``python -m vitpos.commands.models`` rewrites it after a preset changes.
"""

from __future__ import annotations

import argparse
import fnmatch
import pprint
from pathlib import Path

from .preset_table import PRESETS, RELEASED

TASKS = ("classification", "detection", "segmentation")
"""What presets predict (the same as :data:`vitpos.models.factory.TASKS`, which imports torch)."""

_TABLE_FILE = Path(__file__).with_name("preset_table.py")


def count_parameters(name: str) -> int:
    """Parameters of preset ``name``, counted on the meta device (no memory, no init cost)."""
    import torch

    from ..models.factory import create_model

    with torch.device("meta"):
        model = create_model(name)
    return sum(p.numel() for p in model.parameters())


def registry_rows() -> dict[str, tuple[str, int, str]]:
    """``{name: (task, parameters, slots)}`` of every registered preset, computed from the registry."""
    from ..models.factory import get_config, list_models, preset_task

    rows = {}
    for name in list_models():
        pos = get_config(name).position
        slots = " / ".join((pos.absolute, pos.join, pos.conditional, pos.relative))
        rows[name] = (preset_task(name), count_parameters(name), slots)
    return rows


def released_urls() -> dict[str, str]:
    """``{name: url}`` of every preset with the authors' released weights, from :mod:`vitpos.weights.pretrained`."""
    from ..weights.pretrained import RELEASES

    return {name: release.url for name, release in RELEASES.items()}


def write_table(path: Path = _TABLE_FILE) -> None:
    """Rewrite the preset table and the released weights' URLs from the registry."""
    body = pprint.pformat(registry_rows(), width=120, sort_dicts=False)
    urls = pprint.pformat(released_urls(), width=120, sort_dicts=False)
    path.write_text(
        '"""Every preset\'s task, parameter count and position slots, and the URLs of the released weights,\n'
        'for `vitpos models`.\n\nWritten by `python -m vitpos.commands.models`.\n"""\n\n'
        f"PRESETS: dict[str, tuple[str, int, str]] = {body}\n\n"
        f"RELEASED: dict[str, str] = {urls}\n",
        encoding="utf-8",
    )


def matching(pattern: str, task: str | None) -> list[str]:
    """Preset names as :func:`vitpos.models.factory.list_models` selects them, read from the table."""
    if not any(c in pattern for c in "*?["):
        pattern = f"*{pattern}*"
    return [n for n, row in PRESETS.items() if fnmatch.fnmatch(n, pattern) and task in (None, row[0])]


def run(args: argparse.Namespace) -> int:
    names = matching(args.pattern, args.task)
    if args.pretrained:
        names = [n for n in names if n in RELEASED]
    if not names:
        kind = "model with released weights" if args.pretrained else "model"
        raise ValueError(f"no {kind} matches {args.pattern!r}; run 'vitpos models' for the full list")
    if args.pretrained:
        print(f"{'model':48s} {'params':>12s}  released weights (create_model(NAME, pretrained=True))")
        for name in names:
            print(f"{name:48s} {PRESETS[name][1]:>12,d}  {RELEASED[name]}")
        return 0
    print(f"{'model':48s} {'params':>12s}  absolute / join / conditional / relative")
    for name in names:
        _, params, slots = PRESETS[name]
        print(f"{name:48s} {params:>12,d}  {slots}")
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


if __name__ == "__main__":
    write_table()
