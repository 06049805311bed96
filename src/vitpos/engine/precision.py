"""Mixed precision for training and evaluation: which autocast, and a gradient scaler for fp16 on CUDA."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

__all__ = ["AMP_DTYPES", "Precision"]

AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
"""The autocast dtypes by their config names."""


@dataclass(frozen=True)
class Precision:
    """Autocast settings of one run on one device."""

    device_type: str
    dtype: torch.dtype = torch.bfloat16
    enabled: bool = False

    @classmethod
    def for_run(cls, amp: bool, amp_dtype: str, cpu_amp: bool, device: torch.device) -> Precision:
        """Autocast in ``amp_dtype`` when ``amp`` is on, on CUDA always and on CPU with ``cpu_amp``."""
        if amp_dtype not in AMP_DTYPES:
            raise ValueError(f"amp_dtype must be one of {', '.join(AMP_DTYPES)}, got {amp_dtype!r}")
        enabled = amp and (device.type == "cuda" or (cpu_amp and device.type == "cpu"))
        return cls(device.type, AMP_DTYPES[amp_dtype], enabled)

    def autocast(self) -> AbstractContextManager:
        """The autocast context of the forward pass (a no-op when disabled)."""
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)

    @property
    def scales_gradients(self) -> bool:
        """True for fp16 on CUDA (bf16 keeps float32's exponent range and needs no loss scale)."""
        return self.enabled and self.dtype == torch.float16 and self.device_type == "cuda"

    def scaler(self) -> torch.amp.GradScaler:
        """A gradient scaler, active where :attr:`scales_gradients`."""
        return torch.amp.GradScaler(self.device_type, enabled=self.scales_gradients)
