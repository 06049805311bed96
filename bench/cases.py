"""The slot values the benchmark compares, each a set of overrides on a preset."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import vitpos
from vitpos.config import PositionConfig


@dataclass(frozen=True)
class Case:
    """One benchmarked configuration: a label and the slot overrides that build it."""

    label: str
    slots: dict

    def available(self) -> bool:
        """True if every slot value is registered in this build of vitpos."""
        try:
            PositionConfig(**self.slots)
        except ValueError:
            return False
        return True

    @property
    def position(self) -> dict:
        """All four slot values: the case's, and the defaults for the slots it leaves out, so that
        a preset's own slots (e.g. swin_tiny's relative bias) never leak into another case."""
        return {**PositionConfig().to_dict(), **self.slots}

    def fits(self, model: str, img_size: int) -> str | None:
        """None if ``model`` builds with this case, else why not (e.g. a PEG placement deeper than
        a pyramid stage, a relative encoding under spatial-reduction attention)."""
        try:
            with torch.device("meta"):
                vitpos.create_model(model, img_size=img_size, **self.position)
        except ValueError as err:
            return str(err)
        return None


BASELINE = Case("no PE", {"absolute": "none"})

CASES: tuple[Case, ...] = (
    BASELINE,
    Case("learned", {"absolute": "learned"}),
    Case("sincos2d", {"absolute": "sincos2d"}),
    Case("fourier", {"absolute": "fourier"}),
    Case("PEG at 0", {"absolute": "none", "conditional": "peg@0"}),
    Case("PEG at 0-5", {"absolute": "none", "conditional": "peg@0-5"}),
    Case("LaPE (all layers)", {"absolute": "learned", "join": "lape"}),
    Case("iRPE bias product", {"absolute": "none", "relative": "irpe:product:bias:qk"}),
    Case("iRPE ctx k", {"absolute": "none", "relative": "irpe:product:ctx:k"}),
    Case("iRPE ctx qk", {"absolute": "none", "relative": "irpe:product:ctx:qk"}),
    Case("iRPE ctx qkv", {"absolute": "none", "relative": "irpe:product:ctx:qkv"}),
    Case("Swin bias", {"absolute": "none", "relative": "swin"}),
    Case("RoPE 2-D", {"absolute": "none", "relative": "rope2d"}),
    Case("Swin V2 cpb", {"absolute": "none", "relative": "cpb"}),
)

TARGETS: dict[str, tuple[float, float | None]] = {
    # label: (training overhead limit, inference overhead limit) on DeiT-S at 196 tokens
    "learned": (0.01, None),
    "sincos2d": (0.01, None),
    "fourier": (0.01, None),
    "PEG at 0-5": (0.03, None),
    "LaPE (all layers)": (0.03, 0.005),
    "iRPE bias product": (0.05, None),
    "iRPE ctx k": (0.10, None),
    "iRPE ctx qkv": (0.25, None),
}
MEMORY_TARGET = 1.15
"""Peak training memory of iRPE models at 784 tokens, as a multiple of the baseline's."""
