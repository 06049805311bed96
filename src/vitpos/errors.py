"""The errors vitpos raises for bad input: the command line prints them as one line, exit status 2.

All subclass :class:`ValueError`, so ``except ValueError`` keeps catching them.
"""

from __future__ import annotations

__all__ = ["VitposError", "ConfigError", "CheckpointError"]


class VitposError(ValueError):
    """Something the user asked for that cannot be done: a bad option, file, folder or input."""


class ConfigError(VitposError):
    """A configuration field of the wrong type or out of its allowed range."""


class CheckpointError(VitposError):
    """A checkpoint or weights file that is missing, corrupt, unsafe, or does not fit the model asked for."""
