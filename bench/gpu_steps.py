"""The steps the GPU benchmarks time: bf16 autocast training steps and inference, closed by a device sync."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bf16_step(model: torch.nn.Module, images: torch.Tensor, mode: str, compiled: bool) -> Callable[[], None]:
    """One bf16 autocast training step (forward, backward, AdamW) or inference forward on the
    device of ``images``, synchronised."""
    device = images.device
    net = torch.compile(model) if compiled else model
    labels = torch.zeros(images.shape[0], dtype=torch.long, device=device)
    if mode == "infer":
        model.eval()

        def infer() -> None:
            with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16):
                net(images)
            synchronize(device)

        return infer
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(net(images).float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        synchronize(device)

    return train


def peak_bytes(step: Callable[[], None], device: torch.device) -> int | None:
    """Peak CUDA memory allocated during one more call of ``step``; None off CUDA."""
    if device.type != "cuda":
        return None
    torch.cuda.reset_peak_memory_stats(device)
    step()
    return torch.cuda.max_memory_allocated(device)
