"""Named model configurations, one file per family; importing registers them."""

from . import deit  # noqa: F401  (registration)
from . import cpvt  # noqa: F401  (registration)
