"""The ``vitpos`` command line: one entry point, one module per subcommand in ``vitpos.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ["main", "build_parser"]

COMMANDS = (
    "models", "train", "eval", "export",
    "study", "pretrain-pe", "probe", "similarity", "attention", "equivariance", "awareness", "buckets", "relative-bias",
)
"""Subcommands; each is the module ``vitpos.commands.<name with - as _>`` and defines ``add_parser(subparsers)``."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    parser = argparse.ArgumentParser(prog="vitpos", description="Position encodings for vision transformers.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"vitpos.commands.{name.replace('-', '_')}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; errors in user input print one line and exit with status 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, KeyError, FileNotFoundError) as err:
        print(f"vitpos {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
