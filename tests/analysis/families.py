"""One model per position-encoding family, at the tiny test size, for parametrised tests; tiny pyramids."""

from __future__ import annotations

import vitpos
from vitpos.config import slot_registry
from vitpos.registry import ABSOLUTE
from vitpos.spec import SlotSpec

from ..conftest import TINY

CANDIDATES: dict[str, dict[str, str]] = {
    **{f"absolute={name}": {"absolute": name} for name in ABSOLUTE.names()},
    "peg": {"absolute": "none", "conditional": "peg"},
    "peg circular before block 0": {"absolute": "none", "conditional": "peg@-1:pad=circular"},
    "irpe product": {"absolute": "none", "relative": "irpe:product:ctx:k"},
    "irpe cross qkv": {"absolute": "none", "relative": "irpe:cross:ctx:qkv"},
    "irpe euclidean bias": {"absolute": "none", "relative": "irpe:euclidean:bias:qk"},
    **{
        name: {"absolute": "none", "relative": name}
        for name in ("shaw", "xl", "huang", "sasa", "swin", "rope2d", "cpb")
    },
    "lape": {"absolute": "learned", "join": "lape"},
    "lape swin": {"absolute": "sincos2d", "join": "lape", "relative": "swin"},
    "shared": {"absolute": "sincos2d", "join": "shared"},
    "unshared": {"absolute": "learned", "join": "unshared"},
}
"""Family label -> slot overrides; families whose slot value is not registered are skipped."""


def _available(slots: dict[str, str]) -> bool:
    return all(SlotSpec.parse(value).name in slot_registry(slot) for slot, value in slots.items())


FAMILIES = {label: slots for label, slots in CANDIDATES.items() if _available(slots)}


def tiny_model(slots: dict[str, str], **overrides):
    """A 4x4-grid, two-block model with the given slot values, in eval mode."""
    return vitpos.create_model("vit_lite_7_4", **{**TINY, **slots, **overrides}).eval()


TINY_PYRAMIDS = {
    "pvt": dict(arch="pvt", sr_ratios=(4, 2, 1, 1)),
    "swin": dict(arch="swin", window_size=4),
}
"""The host-specific settings of :func:`tiny_pyramid`."""


def tiny_pyramid(arch: str, slots: dict[str, str] | None = None, **overrides):
    """A four-stage ``pvt`` or ``swin`` with one block per stage and widths 8-32: grids 16x16, 8x8, 4x4, 2x2
    at 32x32 (stride 16), in eval mode. PVT reduces the keys of stages 0 and 1 by 4 and 2; Swin's
    windows are 4x4."""
    settings = dict(
        img_size=32,
        patch_size=2,
        embed_dims=(8, 16, 24, 32),
        depths=(1, 1, 1, 1),
        num_heads=(1, 2, 3, 4),
        mlp_ratios=(2.0, 2.0, 2.0, 2.0),
        num_classes=5,
        head="gap",
    )
    return vitpos.create_model(
        f"{arch}_tiny", **{**settings, **TINY_PYRAMIDS[arch], **(slots or {}), **overrides}
    ).eval()
