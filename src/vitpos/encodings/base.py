"""What every slot module is built from and the small interface each slot kind implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..spec import SlotSpec

if TYPE_CHECKING:
    from ..config import PositionConfig

__all__ = ["SlotContext", "SlotEntry", "OptionSchema"]

OptionSchema = dict[str, Callable[[str], object]]
"""Slot options a class accepts: option name -> converter from the option's text."""


@dataclass(frozen=True)
class SlotContext:
    """The model facts a slot module needs to build itself."""

    embed_dim: int
    num_heads: int
    depth: int
    grid: tuple[int, int]
    """The native (training) grid (H, W), counted in patches."""
    num_prefix_tokens: int

    @property
    def head_dim(self) -> int:
        """Channels per attention head."""
        return self.embed_dim // self.num_heads


class SlotEntry:
    """Mixin for registered slot classes: option checks, cross-slot checks and construction.

    A class that takes ``name=value`` options lists them in ``_schema`` (option -> converter);
    the defaults below check them and pass them to the constructor as keywords.
    """

    _schema: ClassVar[OptionSchema] = {}

    @classmethod
    def validate(cls, spec: SlotSpec) -> None:
        """Raise :class:`~vitpos.spec.SpecError` if ``spec`` has options this class does not take."""
        spec.check_no_placement()
        spec.check_flags(set())
        spec.typed_options(cls._schema)

    @classmethod
    def check_combination(cls, position: PositionConfig) -> None:
        """Raise ``ValueError`` if this value cannot be combined with the other slots."""

    @classmethod
    def from_spec(cls, spec: SlotSpec, ctx: SlotContext):
        """Build the module for ``spec`` (``None`` where the slot adds nothing)."""
        build: Callable[..., object] = cls  # the concrete slot class's constructor: (ctx, **options)
        return build(ctx, **spec.typed_options(cls._schema))
