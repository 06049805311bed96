"""CPVT (Chu et al., ICLR 2023): DeiT sizes (Table 9) with PEG instead of an absolute encoding.

``cpvt_ti``/``cpvt_s``/``cpvt_b`` are the paper's default CPVT (Fig. 1b, Alg. 1, Table 2): no
absolute encoding, one PEG after block 0, class token. ``cpvt_*_gap`` are CPVT-GAP (Fig. 1c,
Tables 3 and 4): PEGs after blocks 0..4 (``peg@0-5``), global average pooling, no class token.
The class-token models of Table 4 (marked † there) also use ``0-5``:
``create_model("cpvt_ti", conditional="peg@0-5")``.

The exact counts the paper states are reproduced: 1,920 parameters per PEG of CPVT-Ti (Table
8), and the 5,681,320 of CPVT-Ti in Table 16, which equals DeiT-Ti without its position table
and without the class token plus one PEG: ``create_model("cpvt_ti", head="gap")``. The rounded
totals of Tables 4 and 12 (CPVT-S 23M, CPVT-B 88M, tiny 0-5 5.9M) exceed what
depthwise PEGs add ((k^2 + 1)·D each, under 0.04M for five of them); the presets do not reproduce them.
"""

from ...registry import MODELS
from .deit import DEIT_BASE, DEIT_SMALL, DEIT_TINY

_SIZES = {"ti": DEIT_TINY, "s": DEIT_SMALL, "b": DEIT_BASE}

for _size, _deit in _SIZES.items():
    MODELS.add(f"cpvt_{_size}", _deit.replace(absolute="none", conditional="peg@0"))
    MODELS.add(f"cpvt_{_size}_gap", _deit.replace(absolute="none", conditional="peg@0-5", head="gap"))
