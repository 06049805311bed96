"""The ``triton`` path: FlashAttention-2 style kernels that read bucketed relative terms in registers.

* :mod:`.kernels` — the Triton kernels (forward, dK/dV, dQ);
* :mod:`.launch` — their strides, buffers, grids and tile sizes (autotuned on CUDA);
* :mod:`.reference` — the same arithmetic in PyTorch, where the kernels do not run;
* :mod:`.score_grads` — the atomic-free per-bucket gradients (the ``triton_stored`` path);
* :mod:`.op` — the ``torch.library`` custom operator pair and :func:`fused_attention`.

Triton is imported lazily, on the first kernel launch: the package works without it (on CPU the
operator runs :mod:`.reference`). ``TRITON_INTERPRET=1``, set before that first launch, runs
the kernels on CPU tensors in Triton's interpreter.
"""

from .op import available, fused_attention, runs_kernels

__all__ = ["available", "fused_attention", "runs_kernels"]
