"""The relative slot: terms inside attention that depend on the query-key offset."""

from . import classic, cpb, irpe, rope  # noqa: F401  (registration)
from .base import NoRelative, RelativeBias, RelativePosition
from .buckets import relative_buckets

__all__ = ["RelativePosition", "RelativeBias", "NoRelative", "relative_buckets"]
