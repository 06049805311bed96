"""The relative slot: terms inside attention that depend on the query-key offset."""

from .base import NoRelative, RelativePosition

__all__ = ["RelativePosition", "NoRelative"]
