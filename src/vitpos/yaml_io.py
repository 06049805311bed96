"""Reading YAML that a user or another program wrote, within bounds.

Every YAML file vitpos reads goes through :func:`read_yaml`: plain data only (``yaml.SafeLoader``),
UTF-8 text of at most :data:`MAX_BYTES`, nesting at most :data:`MAX_DEPTH` deep, at most
:data:`MAX_ALIASES` aliases and :data:`MAX_NODES` values once aliases are expanded (so a few
hundred bytes of nested aliases cannot grow into billions of values), no key given twice in a
mapping, and the top level a mapping. Each refusal raises :class:`~vitpos.errors.VitposError`
naming the file, the line where it applies, and what to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import VitposError, quote

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_NODES", "read_yaml"]

MAX_BYTES = 1 << 20
"""The largest YAML file read (1 MiB): configs and export metadata are a few kilobytes."""
MAX_DEPTH = 32
"""The deepest nesting of mappings and lists."""
MAX_ALIASES = 100
"""The most aliases (``*name``) in one file."""
MAX_NODES = 100_000
"""The most values in the document with every alias expanded."""


def read_yaml(path: str | Path, what: str = "config file", sections: tuple[str, ...] = ()) -> dict[str, Any]:
    """The mapping in the YAML file ``path`` (``{}`` for an empty file); ``what`` names the file in errors,
    and each top-level key in ``sections`` that is present must hold a mapping (or nothing)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise VitposError(f"{what} {path} is larger than {MAX_BYTES} bytes; a YAML config is a few kilobytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise VitposError(
            f"{what} {path} is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); save it as UTF-8"
        ) from None
    try:
        _check_events(text, path, what)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return {}
            _check_expanded_size(node, path, what)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        raise VitposError(f"{what} {path} is not valid YAML: {err}") from None
    except _DuplicateKey as err:
        raise VitposError(f"{what} {path}: {err}") from None
    if not isinstance(data, dict):
        raise VitposError(f"{what} {path} must hold a mapping (name: value lines), not a {type(data).__name__}")
    for name in sections:
        if data.get(name) is not None and not isinstance(data[name], dict):
            raise VitposError(
                f"{what} {path}: section {name!r} must be a mapping of name: value lines, "
                f"not a {type(data[name]).__name__} ({quote(data[name])})"
            )
    return data


def _check_events(text: str, path: Path, what: str) -> None:
    """Nesting depth and alias count, from the parser's events (before anything is built)."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise VitposError(
                    f"{what} {path} nests mappings or lists more than {MAX_DEPTH} deep "
                    f"(line {_line(event)}); a config is at most a few levels deep"
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise VitposError(
                    f"{what} {path} uses more than {MAX_ALIASES} aliases (*name; line {_line(event)}); "
                    "write the values out"
                )


def _line(event: yaml.Event) -> int | str:
    return event.start_mark.line + 1 if event.start_mark is not None else "?"


def _check_expanded_size(root: Node, path: Path, what: str) -> None:
    """Raise if the document, with every alias expanded, holds more than :data:`MAX_NODES` values."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:  # post-order over the node graph; a node reached by several aliases is counted each time
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done and any(id(child) not in sizes for child in children):
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
        if sizes[id(node)] > MAX_NODES:
            raise VitposError(
                f"{what} {path} expands to more than {MAX_NODES} values through its aliases "
                f"(line {node.start_mark.line + 1}); write the values out"
            )


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [item for pair in node.value for item in pair]
    return []


class _DuplicateKey(Exception):
    """A mapping that names a key twice (raised while building; :func:`read_yaml` adds the file)."""


class _Loader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise _DuplicateKey(
                    f"line {key_node.start_mark.line + 1}: key {str(key)[:60]!r} is given twice in one mapping; "
                    "keep one (YAML would silently use the last)"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
