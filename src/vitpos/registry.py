"""Name -> object registries for models and for each of the four position slots."""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

__all__ = ["Registry", "UnknownNameError", "ABSOLUTE", "JOIN", "CONDITIONAL", "RELATIVE", "MODELS", "ARCHITECTURES"]

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name that is not in a registry; the message lists the valid ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection filled by the ``@registry.register(name)`` decorator."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

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
            return self._entries[name]
        except KeyError:
            valid = ", ".join(sorted(self._entries))
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid values: {valid}") from None

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


ABSOLUTE: Registry = Registry("absolute encoding")
JOIN: Registry = Registry("join")
CONDITIONAL: Registry = Registry("conditional encoding")
RELATIVE: Registry = Registry("relative encoding")
MODELS: Registry = Registry("model")
ARCHITECTURES: Registry = Registry("architecture")
