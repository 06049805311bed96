"""Named model configurations, one file per family; importing registers them."""

from . import deit, irpe  # noqa: F401  (registration)
