"""The position-encoding families a study compares: a label, slot values, a host, and a pretrained-PE flag."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from ..config import HEADS, SLOT_NAMES, HostConfig, PositionConfig, slot_registry
from ..errors import VitposError
from ..models.factory import create_model
from ..spec import SlotSpec
from .hosts import STUDY_HOSTS, study_host

__all__ = [
    "Family",
    "FamilyError",
    "DEFAULT_FAMILIES",
    "PYRAMID_FAMILIES",
    "BUILT_IN_FAMILIES",
    "parse_family",
    "split_available",
]


class FamilyError(VitposError):
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
    host: str | None = None
    """A study host (:data:`~.hosts.STUDY_HOSTS`: ``pvt``, ``swin``, ``cct``) to train instead of the study's
    ViT; its last stage has the ViT's grid. None: the study's model."""
    options: dict[str, Any] = field(default_factory=dict)
    """Fields of the host's config to change (``depths=(2, 1)``, ``window_size=2``, ...)."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", self.label):
            raise ValueError(f"family label {self.label!r} may only use letters, digits and _ . + -")
        if self.head not in (None, *HEADS):
            raise ValueError(f"family {self.label!r}: head must be one of {', '.join(HEADS)}, got {self.head!r}")
        if self.host is not None and self.host not in STUDY_HOSTS:
            raise ValueError(
                f"family {self.label!r}: unknown host {self.host!r}; study hosts: {', '.join(STUDY_HOSTS)}"
            )
        if self.host not in (None, "vit") and self.pretrained:
            raise ValueError(
                f"family {self.label!r}: a pretrained encoding is one table, saved from and loaded into the "
                f"one-stage ViT; drop 'pretrained' or host={self.host}"
            )
        unknown = sorted(set(self.slots) - set(SLOT_NAMES))
        if unknown:
            raise ValueError(
                f"family {self.label!r}: unknown slot(s) {', '.join(unknown)}; slots: {', '.join(SLOT_NAMES)}"
            )
        # loaded from JSON, tuples arrive as lists: keep one form, so equal families compare equal
        object.__setattr__(
            self, "options", {k: tuple(v) if isinstance(v, list) else v for k, v in self.options.items()}
        )
        fields = {f.name for f in dataclasses.fields(study_host(self.host or "vit"))} - {
            "position",
            "head",
            "num_classes",
        }
        foreign = sorted(set(self.options) - fields)
        if foreign:
            raise ValueError(
                f"family {self.label!r}: unknown slot(s) or host option(s) {', '.join(foreign)}; slots: "
                f"{', '.join(SLOT_NAMES)}; options of the {self.host or 'vit'} host: {', '.join(sorted(fields))}"
            )

    @property
    def absolute(self) -> str:
        """The absolute slot value: the family's, or its host's default (the ViT's ``learned``, Swin's ``none``)."""
        return self.slots.get("absolute", study_host(self.host or "vit").position.absolute)

    @property
    def has_table(self) -> bool:
        """True when the family has an absolute position table the probes can read."""
        return SlotSpec.parse(self.absolute).name != "none"

    @property
    def model_overrides(self) -> dict[str, Any]:
        """What the family changes in its host's model: its slot values, its head if it sets one, its options."""
        return {**self.slots, **({"head": self.head} if self.head else {}), **self.options}

    def host_config(self, study: HostConfig) -> HostConfig:
        """The family's host before its slots: the study's model (``study``), or its host's at the
        study's image size, with the family's options."""
        base = study if self.host is None else study_host(self.host, study.img_size)
        try:
            return base.replace(**self.options) if self.options else base
        except (ValueError, TypeError) as err:
            raise FamilyError(
                f"family {self.label!r} cannot be built on the study's {self.host or 'vit'} host "
                f"({self.describe()}): {err}"
            ) from None

    def model_config(self, study: HostConfig, **overrides: Any) -> HostConfig:
        """The family's model: :meth:`host_config` with the family's slots and head, and ``overrides``."""
        return self.host_config(study).replace(**self.slots, **({"head": self.head} if self.head else {}), **overrides)

    def describe(self) -> str:
        """The overrides as text, e.g.
        ``host=pvt, absolute=none, relative=irpe:product:ctx:k, head=gap (pretrained)``."""
        host = {"host": self.host} if self.host else {}
        text = ", ".join(f"{k}={_text(v)}" for k, v in {**host, **self.model_overrides}.items())
        return text + (" (pretrained)" if self.pretrained else "")

    def missing(self) -> list[str]:
        """Slot values this family needs that are not registered in this installation."""
        return [
            f"{slot}={value}"
            for slot, value in self.slots.items()
            if SlotSpec.parse(value).name not in slot_registry(slot)
        ]

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
            if name not in slot_registry(slot):
                raise FamilyError(
                    f"family {self.label!r}: {slot}={value} names no registered {slot} encoding; "
                    f"valid: {', '.join(sorted(slot_registry(slot).names()))}"
                )

    def check_builds(self, model: HostConfig) -> None:
        """Raise a clear error if the family's model (on the study model ``model``, or on its host) cannot be built."""
        self.validate()
        on = "the study model" if self.host is None else f"the study's {self.host} host"
        try:
            create_model(self.model_config(model))
        except (ValueError, TypeError, KeyError) as err:
            raise FamilyError(f"family {self.label!r} cannot be built on {on} ({self.describe()}): {err}") from None

    def to_dict(self) -> dict:
        """Plain dict, for JSON (keys for a host and options only where the family sets them)."""
        out: dict[str, Any] = {"label": self.label, "slots": dict(self.slots), "pretrained": self.pretrained}
        out |= {"head": self.head} if self.head else {}
        out |= {"host": self.host} if self.host else {}
        return out | (
            {"options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()}}
            if self.options
            else {}
        )


def _text(value: Any) -> str:
    """An override as the text form writes it: tuples as comma-separated values."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _option_value(text: str) -> Any:
    """``2`` -> 2, ``1,1`` -> (1, 1), ``0.5`` -> 0.5, ``none`` -> None; anything else stays text."""
    if text.lower() == "none":
        return None
    parts = text.split(",")
    for kind in (int, float):
        try:
            values = tuple(kind(p) for p in parts)
        except ValueError:
            continue
        return values if len(parts) > 1 or text.endswith(",") else values[0]
    return text


DEFAULT_FAMILIES: tuple[Family, ...] = (
    Family("none", {"absolute": "none"}),
    # std 1 (N(0, 1), as small ViT codes start): from ViT's 0.02 the one-block model sits at chance
    # for hundreds of steps on the relative tasks before it moves
    Family("learned", {"absolute": "learned:std=1"}),
    Family("sincos2d", {"absolute": "sincos2d"}),
    Family("learnable_sincos", {"absolute": "learnable_sincos"}),
    # gamma 2: a kernel about two patches wide; the default 10 is wider than the study's 6x6 grid,
    # so every cell looks alike (the thesis: Fourier's bias "heavily depends on" gamma). scale 10: at
    # PyTorch's default MLP initialisation the cells' encodings differ by a std of 0.01, and the model
    # (and the pretraining) sits at chance; the learned table needed std 1 for the same reason
    Family("fourier", {"absolute": "fourier:gamma=2:scale=10"}),
    Family("fourier_pretrained", {"absolute": "fourier:gamma=2:scale=10"}, pretrained=True),
    # GAP: in a one-block model the class token's output sees no relative position, since every
    # class-to-patch pair falls in the one prefix bucket; the patch tokens' outputs do
    Family("irpe_product", {"absolute": "none", "relative": "irpe:product:ctx:k"}, head="gap"),
    # before block 0: in a one-block model a PEG after the block would reach no attention
    Family("peg", {"absolute": "none", "conditional": "peg@-1"}),
    Family("lape_learned", {"absolute": "learned", "join": "lape"}),
)
"""The thesis's comparison (none, learned, sinusoidal, Fourier, relative) plus the thesis's own
proposals (learnable sinusoidal, pretrained Fourier) and the CPVT and LaPE slots."""

PYRAMID_FAMILIES: tuple[Family, ...] = (
    # a learned table per stage (PVT), std 1 as the ViT's learned family
    Family("pvt_learned", {"absolute": "learned:std=1"}, host="pvt"),
    # Swin as released: its relative bias within windows, no table
    Family("swin_relative", {}, host="swin"),
)
"""Built-in families on the pyramid hosts (:mod:`.hosts`), chosen with ``--family``: each trains
about 1.7 times as long as a ViT family on a CPU, so the default list leaves them out."""
BUILT_IN_FAMILIES = (*DEFAULT_FAMILIES, *PYRAMID_FAMILIES)


def parse_family(text: str) -> Family:
    """A default family by label, or
    ``"label: [host=pvt|swin] slot=spec ... [head=gap] [option=value ...] [pretrained]"``.

    Examples: ``"swin: absolute=none relative=swin head=gap"``, ``"fourier16p: absolute=fourier:gamma=16 pretrained"``,
    ``"pvt_sincos: host=pvt absolute=sincos2d depths=2,1"`` (options are fields of the host's config).
    """
    label, colon, rest = text.partition(":")
    label = label.strip()
    if not colon:
        for family in BUILT_IN_FAMILIES:
            if family.label == label:
                return family
        valid = ", ".join(f.label for f in BUILT_IN_FAMILIES)
        raise FamilyError(
            f"unknown family {label!r}; built-in families: {valid}; or define one as "
            "'label: slot=spec ...', e.g. 'swin: absolute=none relative=swin'"
        )
    slots: dict[str, str] = {}
    options: dict[str, Any] = {}
    pretrained, head, host = False, None, None
    seen: set[str] = set()
    for word in rest.split():
        key, eq, value = word.partition("=")
        if key in seen:
            raise FamilyError(f"family {label!r}: {key!r} is given twice; give it once")
        seen.add(key)
        if word == "pretrained":
            pretrained = True
            continue
        if not eq or not value:
            raise FamilyError(f"family {label!r}: {word!r} must look like slot=spec, e.g. relative=swin")
        if key == "head":
            head = value
        elif key == "host":
            host = value
        elif key in SLOT_NAMES:
            slots[key] = value
        else:
            options[key] = _option_value(value)
    family = Family(label, slots, pretrained, head, host, options)
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
