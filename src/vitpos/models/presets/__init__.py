"""Named model configurations, one file per family; importing registers them."""

from . import deit, thesis  # noqa: F401  (registration)
