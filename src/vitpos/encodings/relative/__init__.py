"""The relative slot: terms inside attention that depend on the query-key offset."""

from .base import NoRelative, RelativeBias, RelativePosition

__all__ = ["RelativePosition", "RelativeBias", "NoRelative"]
