"""The four position slots of a model, each resolved once from its short string form.

A slot value is written ``name[@at][:flag][:key=value]...`` (:mod:`vitpos.spec`). When a
:class:`PositionConfig` is made, every slot is parsed, looked up in its registry and read into
typed options by the registered class (:meth:`SlotClass.parse`); a stage builds each block's
module from those options (:meth:`ResolvedSlot.build`) and never reads the string again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError
from ..registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE, Registry
from ..spec import SlotSpec
from ..validation import check_fields

__all__ = ["SLOT_NAMES", "slot_registry", "SlotContext", "SlotClass", "ResolvedSlot", "PositionConfig"]

SLOT_NAMES = ("absolute", "join", "conditional", "relative")
_SLOT_REGISTRIES: dict[str, Registry] = {
    "absolute": ABSOLUTE,
    "join": JOIN,
    "conditional": CONDITIONAL,
    "relative": RELATIVE,
}


def slot_registry(slot: str) -> Registry:
    """The registry of the values of ``slot`` (one of :data:`SLOT_NAMES`)."""
    if slot not in _SLOT_REGISTRIES:
        raise ConfigError(f"unknown position slot {slot!r}; the slots are {', '.join(SLOT_NAMES)}")
    return _SLOT_REGISTRIES[slot]


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


class SlotClass(Protocol):
    """What a registered slot value offers (:class:`vitpos.encodings.base.SlotEntry` implements it)."""

    def parse(self, spec: SlotSpec) -> Mapping[str, Any]:
        """The typed options of ``spec``; a :class:`~vitpos.spec.SpecError` for anything it does not take."""
        ...

    def check_combination(self, position: PositionConfig) -> None:
        """Raise ``ValueError`` if this value cannot be combined with the other slots."""
        ...

    def build(self, ctx: SlotContext, options: Mapping[str, Any], **host: Any) -> Any:
        """The module of one stage (or block) from ``options``; None where the slot adds nothing."""
        ...


@dataclass(frozen=True)
class ResolvedSlot:
    """One slot's value as read once: its parsed string, the class that implements it, its typed options."""

    spec: SlotSpec
    entry: SlotClass
    options: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The registered name (``irpe`` of ``irpe:product:ctx:k``)."""
        return self.spec.name

    def build(self, ctx: SlotContext, **host: Any) -> Any:
        """The module for ``ctx`` (``host``: what the stage adds, e.g. ``layer=i`` or ``has_absolute``)."""
        return self.entry.build(ctx, self.options, **host)


@dataclass
class PositionConfig:
    """The four orthogonal position slots, each named by its short string form."""

    absolute: str = "learned"
    """A signal per grid cell: none, learned, sincos1d, sincos2d, learnable_sincos, fourier."""
    join: str = "input"
    """Where the absolute signal enters the blocks (input = once, before block 0)."""
    conditional: str = "none"
    """Generators that look at the tokens between blocks (PEG)."""
    relative: str = "none"
    """Terms inside attention that depend on the query-key offset."""

    def __post_init__(self) -> None:
        check_fields(self)
        resolved: dict[str, ResolvedSlot] = {}
        for slot in SLOT_NAMES:
            spec = SlotSpec.parse(getattr(self, slot))
            entry: SlotClass = slot_registry(slot).get(spec.name)
            resolved[slot] = ResolvedSlot(spec, entry, entry.parse(spec))
            setattr(self, slot, str(spec))
        self._resolved = resolved
        for value in resolved.values():
            value.entry.check_combination(self)

    def slot(self, slot: str) -> ResolvedSlot:
        """``slot`` as resolved when this config was made."""
        if slot not in SLOT_NAMES:
            slot_registry(slot)  # raises, naming the slots
        return self._resolved[slot]

    def spec(self, slot: str) -> SlotSpec:
        """The parsed spec of ``slot``."""
        return self.slot(slot).spec

    def entry(self, slot: str) -> Any:
        """The registered class that implements the value of ``slot``."""
        return self.slot(slot).entry

    def to_dict(self) -> dict[str, str]:
        """Plain dict, for YAML/JSON."""
        return dataclasses.asdict(self)
