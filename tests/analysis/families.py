"""One model per position-encoding family, at the tiny test size, for parametrised tests."""

from __future__ import annotations

import vitpos
from vitpos.registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE
from vitpos.spec import SlotSpec

from ..conftest import TINY

CANDIDATES: dict[str, dict[str, str]] = {
    **{f"absolute={name}": {"absolute": name} for name in ABSOLUTE.names()},
    "peg": {"absolute": "none", "conditional": "peg"},
    "peg circular before block 0": {"absolute": "none", "conditional": "peg@-1:pad=circular"},
    "irpe product": {"absolute": "none", "relative": "irpe:product:ctx:k"},
    "irpe cross qkv": {"absolute": "none", "relative": "irpe:cross:ctx:qkv"},
    "irpe euclidean bias": {"absolute": "none", "relative": "irpe:euclidean:bias:qk"},
    **{name: {"absolute": "none", "relative": name} for name in ("shaw", "xl", "huang", "sasa", "swin", "rope2d")},
    "lape": {"absolute": "learned", "join": "lape"},
    "lape swin": {"absolute": "sincos2d", "join": "lape", "relative": "swin"},
    "shared": {"absolute": "sincos2d", "join": "shared"},
    "unshared": {"absolute": "learned", "join": "unshared"},
}
"""Family label -> slot overrides; families whose slot value is not registered are skipped."""


REGISTRIES = {"absolute": ABSOLUTE, "join": JOIN, "conditional": CONDITIONAL, "relative": RELATIVE}


def _available(slots: dict[str, str]) -> bool:
    return all(SlotSpec.parse(value).name in REGISTRIES[slot] for slot, value in slots.items())


FAMILIES = {label: slots for label, slots in CANDIDATES.items() if _available(slots)}


def tiny_model(slots: dict[str, str], **overrides):
    """A 4x4-grid, two-block model with the given slot values, in eval mode."""
    return vitpos.create_model("vit_lite_7_4", **{**TINY, **slots, **overrides}).eval()
