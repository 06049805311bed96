"""Count the operations PyTorch dispatches: on a GPU each is a kernel launch (a few µs of host time).

A training step's operation count bounds its speed on a GPU whatever the arithmetic, and it can be
counted on a CPU: :class:`DispatchCount` is a :class:`~torch.utils._python_dispatch.TorchDispatchMode`
that sees every ATen operation that reaches a backend (after autograd, so the backward pass's too).
Views (``view``, ``t``, ``select``, ...: new metadata over the same memory) launch nothing, so the
count is given both ways: every operation, and the ones that can launch a kernel.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DispatchCount", "launches"]

_METADATA = (torch.ops.aten._unsafe_view.default,)
"""Operations that return a view without saying so in their schema."""


def launches(func: Any) -> bool:
    """Whether the ATen operation ``func`` can launch a kernel (it is not a view)."""
    return not (func.is_view or func in _METADATA)


class DispatchCount(TorchDispatchMode):
    """While active (``with DispatchCount() as count:``), counts every dispatched operation by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.views = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops[str(func.overloadpacket.__name__)] += 1
        if not launches(func):
            self.views += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """Every operation dispatched."""
        return sum(self.ops.values())

    @property
    def kernels(self) -> int:
        """The operations that are not views: at most this many kernel launches on a GPU."""
        return self.total - self.views
