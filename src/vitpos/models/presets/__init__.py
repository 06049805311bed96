"""Named model configurations, one file per family; importing registers them."""

from . import deit, lape  # noqa: F401  (registration)
