"""The ``vitpos`` command line: one entry point, one module per subcommand in ``vitpos.commands``.

Only the module of the command being run is imported (``vitpos --help`` imports none and no
torch), so help is instant. Errors in what the user asked for print one line and exit with
status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import NoReturn

from .errors import command_line
from .ownership import recording
from .progress import showing_progress

__all__ = ["main", "build_parser"]

COMMANDS = (
    "models",
    "train",
    "eval",
    "convert",
    "export",
    "study",
    "pretrain-pe",
    "probe",
    "similarity",
    "attention",
    "equivariance",
    "awareness",
    "buckets",
    "relative-bias",
    "shard",
)
"""Subcommands; each is the module ``vitpos.commands.<name with - as _>`` and defines ``add_parser(subparsers)``."""

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _module_name(command: str) -> str:
    return f"vitpos.commands.{command.replace('-', '_')}"


def _summary(command: str) -> str:
    """The one-line summary of a command, read from its module's docstring without importing it."""
    spec = importlib.util.find_spec(_module_name(command))
    with open(spec.origin, encoding="utf-8") as f:  # type: ignore[union-attr, arg-type]
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    first = doc.split("\n\n")[0]
    return " ".join(first.partition(": ")[2].replace("``", "").split()) or command


def _version() -> str:
    """``__version__`` of the package, read from its ``__init__.py`` without importing it (nor torch)."""
    with open(os.path.join(_PACKAGE_DIR, "__init__.py"), encoding="utf-8") as f:
        for node in ast.parse(f.read()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
                return str(ast.literal_eval(node.value))
    return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose error for an option value that starts with '-' says how to pass one."""

    def error(self, message: str) -> NoReturn:
        if message.endswith("expected one argument"):
            option = message.removeprefix("argument ").split(":")[0].split("/")[-1]
            message += f" (a value that starts with '-' is joined to the option with '=', e.g. {option}=-1)"
        super().error(message)


def _build(command: str | None) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The parser with ``command`` fully attached, the others as stubs (None: every command attached)."""
    parser = _Parser(prog="vitpos", description="Position encodings for vision transformers.")
    parser.add_argument("--version", action="version", version=f"vitpos {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if command is None or name == command:
            importlib.import_module(_module_name(name)).add_parser(sub)
            _add_progress_switch(sub.choices[name])
        else:
            sub.add_parser(name, help=_summary(name))
    return parser, sub


def _add_progress_switch(parser: argparse.ArgumentParser) -> None:
    """``--no-progress`` on a command that has no progress option of its own (``train`` has ``--[no-]progress``)."""
    if all(action.dest != "progress" for action in parser._actions):
        parser.add_argument(
            "--no-progress",
            dest="progress",
            action="store_false",
            help="draw no progress bars (on stderr, with the time left, while long steps run)",
        )


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    return _build(None)[0]


def _command_in(argv: Sequence[str]) -> str | None:
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def is_user_error(err: BaseException) -> bool:
    """Whether ``err`` is about the user's input (one line, status 2) rather than a bug in vitpos.

    vitpos's own errors, failures of the file system (missing, unreadable or full), and value
    errors raised by vitpos code itself count as the user's; a ValueError from deep inside a
    library called by vitpos does not.
    """
    from .errors import VitposError  # light; kept local so that --help imports nothing

    if isinstance(err, (VitposError, OSError)):
        return True
    if isinstance(err, (ValueError, KeyError)):
        tb = err.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        return tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep)
    return False


QUIET_WARNINGS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)
"""Messages of other libraries' warnings that say nothing to a vitpos user (torch's own deprecations
met inside ``torch.export`` and ONNX export); they are not printed."""


def _origin(filename: str) -> str | None:
    """The module that ``filename`` is, outside vitpos; None for a vitpos file."""
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE_DIR + os.sep):
        return None
    for name, module in list(sys.modules.items()):
        if os.path.abspath(getattr(module, "__file__", None) or "") == path:
            return name
    return os.path.basename(filename)


def _show_warning(
    command: str, message: Warning | str, category: type[Warning], filename: str, *_: object, **__: object
) -> None:
    """Print a warning on one line: vitpos's own under the command's name, another library's under its module's."""
    origin = None if category.__module__.partition(".")[0] == "vitpos" else _origin(filename)
    prefix = (
        f"vitpos {command}: warning"
        if origin is None
        else f"vitpos {command}: warning from {origin} ({category.__name__})"
    )
    print(f"{prefix}: {message}", file=sys.stderr)


def _message(err: BaseException) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return " ".join(text.split()) or type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; errors in user input print one line and exit with status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, sub = _build(_command_in(argv) or "")
    args, extra = parser.parse_known_args(argv)
    if extra:  # the subcommand's usage, not the top level's
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with (
            warnings.catch_warnings(),
            command_line(),
            showing_progress(getattr(args, "progress", True)),
            recording(args.command),
        ):
            for pattern in QUIET_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
            warnings.showwarning = functools.partial(_show_warning, args.command)
            status = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return status
    except BrokenPipeError:  # `vitpos models | head -3`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 141  # what a shell reports for a command ended by SIGPIPE
    except KeyboardInterrupt:
        print(f"vitpos {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if is_user_error(err):
            print(f"vitpos {args.command}: error: {_message(err)}", file=sys.stderr)
            return 2
        traceback.print_exc()
        print(
            f"vitpos {args.command}: internal error ({type(err).__name__}); this is a bug in vitpos: "
            "please report it with the traceback above and the command you ran",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
