"""The ``detr`` join: the absolute encoding added to the queries and keys of every block.

DETR's encoder layer (Carion et al. 2020, Fig. 10 and its code) attends with ``q = k = x + pos``
and ``v = x``, in every layer; the residual stream never carries the encoding. Here ``x`` is a
block's normalised attention input (pre-norm blocks, DETR's ``normalize_before`` form). Without
an absolute encoding the join adds nothing (DETR with no spatial encoding, iRPE Table 6 #2, #4).
"""

from __future__ import annotations

import torch

from ..grid import Grid
from ..registry import JOIN
from .join import Join, JoinAdditions

__all__ = ["DetrJoin"]


@JOIN.register("detr")
class DetrJoin(Join):
    """Every block's queries and keys see ``x + pe``; values and the residual stream see ``x``."""

    def additions(self, pe: torch.Tensor | None, grid: Grid) -> JoinAdditions:
        return JoinAdditions() if pe is None else JoinAdditions(query_key=(pe,) * self.depth)
