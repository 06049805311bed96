"""Which implementation computes one attention call: the one place that decides, per device.

Paths (:data:`PATHS`), what each can give, and the policy that picks among them. The choices
rest on these measurements:

* CPU (2 cores, ``python -m bench``, BENCHMARKS.md): with a gradient, the ``stored`` path
  (:mod:`.bucketed`, the (B, heads, N, N) weights kept, terms added in place, bias gradients
  reduced before the scatter) beats autograd through a float mask (``scaled_dot_product_attention``
  falls back to its math path when the mask needs a gradient); from
  :data:`CHUNK_FROM_TOKENS` tokens on the ``chunked`` path keeps training memory near that of
  no encoding (``python -m bench.reference``: at 784 tokens 16 MiB instead of 37 MiB per layer,
  at 3136 tokens 118 instead of 512 MiB). Without a gradient nothing is kept for backward:
  SDPA with the terms as one float mask is fastest, except with a term on values, which SDPA
  cannot give, where ``stored`` is faster than the explicit softmax. FlexAttention runs eagerly
  on CPU (its math reference, forward only) and is never chosen there.
* CUDA (BENCHMARKS.md, "Earlier GPU measurements": one H100, bf16 training step of DeiT-S,
  batch 256, 196 tokens, the step with the term over the step without it): bias-only terms take
  ``sdpa`` with the terms as one float mask (row "bias per bucket, SDPA with the bias materialised":
  x1.28, against x6.47 for the row "FlexAttention score_mod reading the table"); contextual terms
  take ``sdpa`` too (row "contextual, on k, SDPA with a materialised (B, heads, N, N) mask": x1.60,
  against x1.62 for the row "contextual, on k, FlexAttention score_mod"); a term on values, which
  neither SDPA nor FlexAttention gives, takes ``stored`` / ``chunked`` as on CPU. Other dtypes and
  token counts take the same paths, unmeasured on a GPU. The fused ``triton`` path
  (:mod:`.triton`) is opt-in (``path="triton"``, ``Attention.path = "triton"``): it becomes a
  default only after a GPU row shows it right on first and later calls and fastest
  (``python -m bench.gpu`` measures it). On CPU ``triton`` runs, when forced, the same arithmetic
  in PyTorch, or the kernels in Triton's interpreter under ``TRITON_INTERPRET=1`` (how the tests
  prove them).

A path asked for (``path=``) that cannot give what the call needs (a value term, the weights,
dropout, a gradient, the dtype) falls back to the policy's choice with a warning; a term is
never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .terms import RelativeTerms
from .triton import available, runs_kernels

__all__ = ["PATHS", "SUPPORTED_DTYPES", "CHUNK_FROM_TOKENS", "Request", "unsupported", "choose_path"]

PATHS = ("sdpa", "flex", "explicit", "stored", "chunked", "triton")
"""``sdpa``: ``scaled_dot_product_attention`` with the logit terms as one float mask;
``flex``: FlexAttention with a ``score_mod``; ``explicit``: logits, softmax and weights as
tensors (the only path that returns the weights); ``stored`` / ``chunked``: :mod:`.bucketed`;
``triton``: the fused kernels of :mod:`.triton`."""

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

CHUNK_FROM_TOKENS = 320
"""From this sequence length on (e.g. an 18 x 18 grid plus a class token) training with relative
terms runs in query chunks. A pre-norm block with MLP ratio 4 keeps about 16 token-sized (B, N, D)
activations for backward; the stored (B, heads, N, N) weights add N / (16 d) of that: a fifth at
197 tokens, where chunking's recomputation (about a fifth of the attention's time) is not worth it,
three quarters at 785. From 320 tokens on (d = 64, as in every ViT preset) they would add over 30%."""


@dataclass(frozen=True)
class Request:
    """What one attention call needs."""

    device: str
    dtype: torch.dtype
    num_tokens: int
    terms: RelativeTerms | None
    needs_grad: bool
    dropout: bool
    return_weights: bool

    @property
    def logit_terms(self) -> bool:
        return self.terms is not None and self.terms.logit_terms

    @property
    def value_term(self) -> bool:
        return self.terms is not None and self.terms.value_term

    @property
    def contextual(self) -> bool:
        return self.terms is not None and self.terms.contextual

    @property
    def bucketed(self) -> bool:
        """True if the terms hold tables looked up by bucket id."""
        return self.terms is not None and self.terms.ids is not None


def unsupported(path: str, request: Request) -> str | None:
    """Why ``path`` cannot compute ``request``, or None if it can."""
    if path not in PATHS:
        raise ValueError(f"unknown attention path {path!r}; valid paths: {', '.join(PATHS)}")
    if request.return_weights and path != "explicit":
        return "only the explicit path returns the attention weights"
    if request.dropout and path not in ("sdpa", "explicit"):
        return "attention dropout runs on the sdpa and explicit paths only"
    if request.value_term and path in ("sdpa", "flex"):
        return "a term on values needs the attention weights per bucket"
    if path == "flex" and request.needs_grad and request.device != "cuda":
        return "FlexAttention's backward runs on CUDA only"
    if path == "triton" and request.device == "cuda" and not available():
        return "Triton is not installed (pip install triton)"
    if path == "triton" and request.dtype == torch.float64 and runs_kernels(torch.device(request.device)):
        return "the fused kernels compute in float32 and take bf16, fp16 or float32 inputs"
    return None


def choose_path(request: Request) -> str:
    """The fastest measured path that can compute ``request`` (see the module docstring)."""
    if request.return_weights or (request.dropout and request.value_term):
        return "explicit"
    if request.dropout or not (request.logit_terms or request.value_term):
        return "sdpa"
    if request.device == "cuda" and not request.value_term:
        return "sdpa"
    if not request.needs_grad:
        return "stored" if request.value_term else "sdpa"
    return "chunked" if request.num_tokens >= CHUNK_FROM_TOKENS else "stored"
