"""The position-encoding families a study compares: a label, slot values, and a pretrained-PE flag."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import SLOT_NAMES, ModelConfig, PositionConfig
from ..models.factory import create_model
from ..registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE
from ..spec import SlotSpec

__all__ = ["Family", "FamilyError", "DEFAULT_FAMILIES", "parse_family", "split_available"]

_REGISTRIES = {"absolute": ABSOLUTE, "join": JOIN, "conditional": CONDITIONAL, "relative": RELATIVE}


class FamilyError(ValueError):
    """A family that names an unknown slot value or a combination that cannot be built."""


@dataclass(frozen=True)
class Family:
    """One arm of the comparison."""

    label: str
    """Name in tables and figures; also the folder name of its cells."""
    slots: dict[str, str] = field(default_factory=dict)
    """Slot overrides on the study model (unset slots keep their defaults: learned, input, none, none)."""
    pretrained: bool = False
    """Start the absolute encoding from a PE pretrained on direction4 then distance (thesis §5.1)."""
    head: str | None = None
    """The model's head, ``cls`` or ``gap``, where the family needs another than the study model's."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", self.label):
            raise ValueError(f"family label {self.label!r} may only use letters, digits and _ . + -")
        if self.head not in (None, "cls", "gap"):
            raise ValueError(f"family {self.label!r}: head must be 'cls' or 'gap', got {self.head!r}")
        unknown = sorted(set(self.slots) - set(SLOT_NAMES))
        if unknown:
            raise ValueError(f"family {self.label!r}: unknown slot(s) {', '.join(unknown)}; slots: {', '.join(SLOT_NAMES)}")

    @property
    def absolute(self) -> str:
        """The absolute slot value (``learned`` when not overridden, the host's default)."""
        return self.slots.get("absolute", PositionConfig().absolute)

    @property
    def has_table(self) -> bool:
        """True when the family has an absolute position table the probes can read."""
        return SlotSpec.parse(self.absolute).name != "none"

    @property
    def model_overrides(self) -> dict[str, str]:
        """What the family changes in the study model: its slot values, and its head if it sets one."""
        return {**self.slots, **({"head": self.head} if self.head else {})}

    def describe(self) -> str:
        """The overrides as text, e.g. ``absolute=none, relative=irpe:product:ctx:k, head=gap (pretrained)``."""
        text = ", ".join(f"{k}={v}" for k, v in self.model_overrides.items())
        return text + (" (pretrained)" if self.pretrained else "")

    def missing(self) -> list[str]:
        """Slot values this family needs that are not registered in this installation."""
        return [f"{slot}={value}" for slot, value in self.slots.items() if SlotSpec.parse(value).name not in _REGISTRIES[slot]]

    def validate(self) -> None:
        """Raise a clear error if the slot values do not form a valid position config."""
        try:
            PositionConfig(**self.slots)
        except ValueError as err:
            raise FamilyError(f"family {self.label!r}: {err}") from None

    def check_registered(self) -> None:
        """Raise a clear error naming the valid values if a slot value is not registered."""
        for slot, value in self.slots.items():
            name = SlotSpec.parse(value).name
            if name not in _REGISTRIES[slot]:
                raise FamilyError(f"family {self.label!r}: {slot}={value} names no registered {slot} encoding; "
                                  f"valid: {', '.join(sorted(_REGISTRIES[slot].names()))}")

    def check_builds(self, model: ModelConfig) -> None:
        """Raise a clear error if the study model with this family's overrides cannot be built."""
        self.validate()
        try:
            create_model(model.replace(**self.model_overrides))
        except (ValueError, TypeError, KeyError) as err:
            raise FamilyError(f"family {self.label!r} cannot be built on the study model ({self.describe()}): {err}") from None

    def to_dict(self) -> dict:
        """Plain dict, for JSON."""
        out = {"label": self.label, "slots": dict(self.slots), "pretrained": self.pretrained}
        return out | ({"head": self.head} if self.head else {})


DEFAULT_FAMILIES: tuple[Family, ...] = (
    Family("none", {"absolute": "none"}),
    # std 1 (N(0, 1), as small ViT codes start): from ViT's 0.02 the one-block model sits at chance
    # for hundreds of steps on the relative tasks before it moves
    Family("learned", {"absolute": "learned:std=1"}),
    Family("sincos2d", {"absolute": "sincos2d"}),
    Family("learnable_sincos", {"absolute": "learnable_sincos"}),
    # gamma 2: a kernel about two patches wide; the default 10 is wider than the study's 6x6 grid,
    # so every cell looks alike (the thesis: Fourier's bias "heavily depends on" gamma)
    Family("fourier", {"absolute": "fourier:gamma=2"}),
    Family("fourier_pretrained", {"absolute": "fourier:gamma=2"}, pretrained=True),
    # GAP: in a one-block model the class token's output sees no relative position, since every
    # class-to-patch pair falls in the one prefix bucket; the patch tokens' outputs do
    Family("irpe_product", {"absolute": "none", "relative": "irpe:product:ctx:k"}, head="gap"),
    # before block 0: in a one-block model a PEG after the block would reach no attention
    Family("peg", {"absolute": "none", "conditional": "peg@-1"}),
    Family("lape_learned", {"absolute": "learned", "join": "lape"}),
)
"""The thesis's comparison (none, learned, sinusoidal, Fourier, relative) plus the thesis's own
proposals (learnable sinusoidal, pretrained Fourier) and the CPVT and LaPE slots."""


def parse_family(text: str) -> Family:
    """A default family by label, or ``"label: slot=spec slot=spec [head=gap] [pretrained]"``.

    Example: ``"swin: absolute=none relative=swin head=gap"``, ``"fourier16p: absolute=fourier:gamma=16 pretrained"``.
    """
    label, colon, rest = text.partition(":")
    label = label.strip()
    if not colon:
        for family in DEFAULT_FAMILIES:
            if family.label == label:
                return family
        valid = ", ".join(f.label for f in DEFAULT_FAMILIES)
        raise FamilyError(
            f"unknown family {label!r}; built-in families: {valid}; or define one as "
            "'label: slot=spec ...', e.g. 'swin: absolute=none relative=swin'"
        )
    slots: dict[str, str] = {}
    pretrained, head = False, None
    for word in rest.split():
        if word == "pretrained":
            pretrained = True
            continue
        slot, eq, value = word.partition("=")
        if not eq or not value:
            raise FamilyError(f"family {label!r}: {word!r} must look like slot=spec, e.g. relative=swin")
        if slot == "head":
            head = value
        else:
            slots[slot] = value
    family = Family(label, slots, pretrained, head)
    family.check_registered()
    return family


def split_available(families: list[Family] | tuple[Family, ...]) -> tuple[list[Family], dict[str, list[str]]]:
    """Families whose slot values are all registered, and the missing values of the others."""
    available, missing = [], {}
    for family in families:
        absent = family.missing()
        if absent:
            missing[family.label] = absent
        else:
            available.append(family)
    return available, missing
