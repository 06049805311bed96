"""Position encodings, one registered class per method; importing this fills the registries."""

from . import absolute, conditional, detr_join, join, lape, peg, relative, sine  # noqa: F401  (registration)
from .base import SlotContext, SlotEntry

__all__ = ["SlotContext", "SlotEntry"]
