"""Name -> object registries for models and for each of the four position slots."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .errors import VitposError

__all__ = [
    "Registry",
    "UnknownNameError",
    "ABSOLUTE",
    "JOIN",
    "CONDITIONAL",
    "RELATIVE",
    "MODELS",
    "ARCHITECTURES",
    "TASKS",
]

T = TypeVar("T")


class UnknownNameError(KeyError, VitposError):
    """A name that is not in a registry; the message lists the valid ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection filled by the ``@registry.register(name)`` decorator.

    ``sources`` are the modules whose import registers the built-in entries; they are imported
    on the first lookup, so importing vitpos stays light until a registry is used.
    """

    def __init__(self, kind: str, *sources: str) -> None:
        self.kind = kind
        self._sources = sources
        self._entries: dict[str, T] = {}

    @property
    def _filled(self) -> dict[str, T]:
        if self._sources:
            sources, self._sources = self._sources, ()
            for source in sources:
                importlib.import_module(source)
        return self._entries

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that files the object under ``name``."""

        def add(obj: T) -> T:
            self.add(name, obj)
            return obj

        return add

    def add(self, name: str, obj: T) -> None:
        """File ``obj`` under ``name``; a second entry with the same name is an error."""
        if name in self._entries:
            raise KeyError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = obj

    def get(self, name: str) -> T:
        """Look ``name`` up; an unknown name lists the valid ones."""
        try:
            return self._filled[name]
        except KeyError:
            valid = ", ".join(sorted(self._filled))
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid values: {valid}") from None

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._filled)

    def __contains__(self, name: object) -> bool:
        return name in self._filled

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


ABSOLUTE: Registry = Registry("absolute encoding", "vitpos.encodings")
JOIN: Registry = Registry("join", "vitpos.encodings")
CONDITIONAL: Registry = Registry("conditional encoding", "vitpos.encodings")
RELATIVE: Registry = Registry("relative encoding", "vitpos.encodings")
MODELS: Registry = Registry("model", "vitpos.models", "vitpos.tasks")
"""Presets: the hosts' (:mod:`vitpos.models.presets`) and the tasks' models (DETR, Semantic FPN)."""
ARCHITECTURES: Registry = Registry("architecture", "vitpos.models", "vitpos.tasks")
TASKS: Registry = Registry("task", "vitpos.tasks")
"""Data task name -> :class:`~vitpos.tasks.base.TaskKind`."""
