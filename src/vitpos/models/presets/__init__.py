"""Named model configurations, one file per family; importing registers them."""

from . import cpvt, deit, lape  # noqa: F401  (registration)
