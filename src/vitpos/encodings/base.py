"""The small interface every registered slot class implements: parse a slot string once, build from it.

:class:`~vitpos.config.PositionConfig` calls :meth:`SlotEntry.parse` once per slot when it is
made and keeps the typed options; a stage calls :meth:`SlotEntry.build` with them for every
stage (or block) it builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..config.position import SlotContext
from ..spec import SlotSpec

if TYPE_CHECKING:
    from ..config.position import PositionConfig

__all__ = ["SlotContext", "SlotEntry", "OptionSchema"]

OptionSchema = dict[str, Callable[[str], object]]
"""Slot options a class accepts: option name -> converter from the option's text."""


class SlotEntry:
    """Mixin for registered slot classes: parsing, cross-slot checks and construction.

    A class that takes ``name=value`` options lists them in ``_schema`` (option -> converter);
    the defaults below check them and pass them to the constructor as keywords. A class with
    flags or a placement overrides :meth:`parse`; one built from more than ``(ctx, **options)``
    overrides :meth:`build`.
    """

    _schema: ClassVar[OptionSchema] = {}

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        """The typed options of ``spec`` (constructor keywords); a :class:`~vitpos.spec.SpecError` otherwise."""
        spec.check_no_placement()
        spec.check_flags(set())
        return spec.typed_options(cls._schema)

    @classmethod
    def validate(cls, spec: SlotSpec) -> None:
        """Raise :class:`~vitpos.spec.SpecError` if ``spec`` has options this class does not take."""
        cls.parse(spec)

    @classmethod
    def check_combination(cls, position: PositionConfig) -> None:
        """Raise ``ValueError`` if this value cannot be combined with the other slots."""

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], **host: Any) -> Any:
        """The module for ``ctx`` from parsed ``options`` (``None`` where the slot adds nothing)."""
        construct: Callable[..., object] = cls  # the concrete slot class's constructor: (ctx, **host, **options)
        return construct(ctx, **host, **options)

    @classmethod
    def from_spec(cls, spec: SlotSpec, ctx: SlotContext, **host: Any) -> Any:
        """Parse ``spec`` and build: for one module made outside a config (tests, tools)."""
        return cls.build(ctx, cls.parse(spec), **host)
