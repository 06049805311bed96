"""Named model configurations, one file per family; importing registers them."""

from . import ceit, compact, cpvt, deit, distilled, irpe, lape, pvt, rope_vit, swin, t2t, thesis  # noqa: F401  (registration)
