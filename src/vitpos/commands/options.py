"""Command-line options generated from config dataclasses: one ``--flag`` per field, its
docstring as help, its type hint as parser.

Every generated option defaults to "not given" (absent from the parsed namespace), so a
command can tell the user's choices from the dataclass defaults and layer them over a config
file.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = [
    "field_docs",
    "add_dataclass_options",
    "add_model_options",
    "given_options",
    "parse_size_list",
    "option_type",
]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (read from its source and its bases')."""
    docs: dict[str, str] = {}
    for owner in reversed(cls.__mro__):  # a subclass's docstring wins over its base's
        if dataclasses.is_dataclass(owner):
            docs.update(_own_field_docs(owner))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # no source available: options go without help text
        return {}
    docs: dict[str, str] = {}
    statement = tree.body[0]
    assert isinstance(statement, ast.ClassDef), "the source of a class starts with its class statement"
    for node, nxt in itertools.pairwise(statement.body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _tuple_parser(item: Callable[[str], Any], length: int | None) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        values = tuple(item(v) for v in text.split(","))
        if length is not None and len(values) != length:
            raise argparse.ArgumentTypeError(f"expected {length} comma-separated values, got {text!r}")
        return values

    return parse


def _parser_for(hint: Any) -> tuple[Callable[[str], Any] | None, str]:
    """(parser, metavar) for a type hint; parser None means a boolean switch."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if len(args) == 1:
            inner, metavar = (_parse_bool, "BOOL") if args[0] is bool else _parser_for(args[0])
            assert inner is not None, "only bool has no parser, and bool takes _parse_bool here"
            return (lambda text: None if text.lower() == "none" else inner(text)), metavar + "|none"
        if int in args and any(typing.get_origin(a) is tuple for a in args):  # e.g. img_size: 32 or 32,48
            return _tuple_or_int, "N[,N]"
    if origin is tuple:
        length = None if (len(args) == 2 and args[1] is Ellipsis) else len(args)
        return _tuple_parser(args[0], length), "X,Y"
    if hint is bool:
        return None, ""
    if hint in (int, float, str):
        return hint, {int: "N", float: "X", str: "TEXT"}[hint]
    raise TypeError(f"no command-line parser for type {hint!r}")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _tuple_or_int(text: str) -> int | tuple[int, ...]:
    values = tuple(int(v) for v in text.split(","))
    return values[0] if len(values) == 1 else values


def add_dataclass_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *classes: type,
    skip: tuple[str, ...] = (),
    show_defaults: bool = True,
    help_overrides: dict[str, str] | None = None,
) -> list[str]:
    """Add ``--field-name`` for every field of the dataclasses ``classes`` not in ``skip``; returns the field names.

    With several classes (the configs of every host) a field some lack says which ``arch`` has
    it, and a field typed differently by different classes (``num_heads``: one for the ViT,
    one per stage for a pyramid) takes ``N`` or ``N,N,...``; the chosen class checks the value.
    ``help_overrides`` replaces the generated help (docstring and default) of some fields.
    """
    fields: dict[str, list[tuple[type, dataclasses.Field]]] = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            if f.name not in skip:
                fields.setdefault(f.name, []).append((cls, f))
    docs = {cls: field_docs(cls) for cls in classes}
    for name, owners in fields.items():
        cls, f = owners[0]
        hints = {repr(typing.get_type_hints(c)[name]) for c, _ in owners}
        parse, metavar = (
            _parser_for(typing.get_type_hints(cls)[name]) if len(hints) == 1 else (_tuple_or_int, "N[,N...]")
        )
        help_text = docs[cls].get(name, name.replace("_", " "))
        if show_defaults:
            factory = f.default_factory
            default = f.default if factory is dataclasses.MISSING else factory()
            help_text += f" (default: {default})"
        if len(owners) < len(classes):
            help_text += f" [arch {', '.join(a for c, _ in owners for a in _archs(c))}]"
        elif len(hints) > 1:
            help_text += " [one value, or one per stage where the host's config has a tuple]"
        help_text = (help_overrides or {}).get(name, help_text).replace("%", "%%")
        flag = "--" + name.replace("_", "-")
        if parse is None:
            parser.add_argument(
                flag, dest=name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text
            )
        else:
            parser.add_argument(flag, dest=name, type=parse, metavar=metavar, default=argparse.SUPPRESS, help=help_text)
    return list(fields)


def _archs(cls: type) -> tuple[str, ...]:
    """The ``arch`` values a host config class accepts."""
    arch = next(f for f in dataclasses.fields(cls) if f.name == "arch")
    return arch.metadata["allowed"].choices


def add_model_options(parser: argparse.ArgumentParser, description: str) -> dict[str, list[str]]:
    """The "model options" group (every field of every host's config, checked by the chosen host's)
    and the "position slots" group; returns their names as ``{"model": [...], "slots": [...]}``."""
    from ..config import HOST_CONFIGS, PositionConfig

    model_group = parser.add_argument_group("model options", description)
    slot_group = parser.add_argument_group(
        "position slots", "override the preset's slot values by their short strings, e.g. --absolute fourier:gamma=10"
    )
    return {
        "model": add_dataclass_options(model_group, *HOST_CONFIGS, skip=("position",), show_defaults=False),
        "slots": add_dataclass_options(slot_group, PositionConfig, show_defaults=False),
    }


def option_type(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` from an option converter (``vitpos.spec.positive_int`` ...): its
    ValueError becomes argparse's message, which names the option and the value."""

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{err}, got {text!r}") from None

    parse.__name__ = convert.__name__
    return parse


def given_options(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The options among ``names`` that the user actually gave."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def parse_size_list(text: str) -> list[int | tuple[int, int]]:
    """``32,48,64`` or ``32,48x64``: image sizes, square unless written HxW."""
    sizes: list[int | tuple[int, int]] = []
    for part in text.split(","):
        h, x, w = part.strip().partition("x")
        try:
            size = (int(h), int(w)) if x else (int(h), int(h))
        except ValueError:
            raise argparse.ArgumentTypeError(f"cannot read image size {part!r}; write 32 or 32x48") from None
        if min(size) < 1:
            raise argparse.ArgumentTypeError(f"image size {part!r} must be at least 1 pixel on each side")
        sizes.append(size if x else size[0])
    return sizes


class Once(argparse.Action):
    """An option that may be given once: a second value is an error rather than silently winning."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None):
        before = getattr(namespace, self.dest, None)
        if before is not None and before != self.default:
            raise argparse.ArgumentError(self, f"given twice ({before}, then {values}); give it once")
        setattr(namespace, self.dest, values)
