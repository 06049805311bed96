"""Named model configurations, one file per family; importing registers them."""

from . import cpvt, deit, detr, fpn, irpe, lape, pvt, swin, thesis  # noqa: F401  (registration)  # noqa: F401  (registration)
