"""Named model configurations, one file per family; importing registers them."""

from . import cpvt, deit, irpe, lape, thesis  # noqa: F401  (registration)
from . import detr, fpn, pvt, swin  # noqa: F401  (registration)
