"""Attention inside :func:`torch.vmap` (stacked ensembles): the one path with a batching rule everywhere.

Under vmap every attention call takes the ``explicit`` path (logits, softmax and weights as
tensors), whatever the policy chose or the caller forced: matmul, softmax and the terms' gathers
have batching rules on every device. The other paths do not: on CUDA the fused kernels of
``scaled_dot_product_attention`` refuse the strides vmap gives them ("LSE is not correctly aligned
(strideH)"), on a CPU its kernel runs one member at a time (vmap's fallback loop); the custom
operator ``vitpos::fused_attention`` has no batching rule; the autograd function of the
``stored`` and ``chunked`` paths does not support functorch transforms; FlexAttention is a
compiled kernel. The explicit path keeps a (heads, N, N) tensor per image, which at the small
models that train stacked (37 tokens in the study) costs little.
"""

from __future__ import annotations

import torch

__all__ = ["VMAP_PATH", "under_vmap"]

VMAP_PATH = "explicit"
"""The path every attention call takes under :func:`torch.vmap`."""


def under_vmap(*tensors: torch.Tensor) -> bool:
    """True if any of ``tensors`` is batched by :func:`torch.vmap` (``torch.compile`` reads it as a constant)."""
    return any(torch._C._functorch.is_batchedtensor(t) for t in tensors)
