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
* CUDA: :data:`CUDA_TABLE`, one row per kind of term (:func:`kind`), dtype and token range
  (:func:`token_range`), each with the measurement behind it. The ``triton`` path (:mod:`.triton`),
  compiled ``flex`` and the compiled rotation of RoPE are opt-in (``path="triton"``,
  ``Attention.path = "triton"``): a path becomes a row of the table only after a GPU row shows it
  right on first and later calls and fastest. ``python -m bench.gpu --session`` times every path and
  variant of every bucketed term side by side, and ``python -m bench.quick_report ROWS.json --table
  --policy THIS_FILE`` writes the rows of :data:`CUDA_TABLE` its fastest paths propose. On CPU
  ``triton`` runs, when forced, the same arithmetic in PyTorch, or the kernels in Triton's
  interpreter under ``TRITON_INTERPRET=1`` (how the tests prove them).

A path asked for (``path=``) that cannot give what the call needs (a value term, the weights,
dropout, a gradient, the dtype) falls back to the policy's choice with a warning; a term is
never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .terms import RelativeTerms
from .triton import available, runs_kernels

__all__ = [
    "PATHS", "FLEX_PATHS", "FUSED_PATHS", "ROTATIONS", "SUPPORTED_DTYPES", "CHUNK_FROM_TOKENS", "KINDS", "CUDA_TABLE",
    "Request", "kind", "token_range", "table_path", "unsupported", "choose_path", "rotation_path",
]  # fmt: skip

PATHS = ("sdpa", "flex", "flex_gathered", "explicit", "stored", "chunked", "triton", "triton_stored")
"""``sdpa``: ``scaled_dot_product_attention`` with the logit terms as one float mask;
``flex``: FlexAttention with a ``score_mod`` that reads the per-bucket tables at every pair;
``flex_gathered``: the same with the biases per bucket first gathered into one batch-free
(heads, N, N) bias (:func:`.flex.gathered_bias`); ``explicit``: logits, softmax and weights as
tensors (the only path that returns the weights); ``stored`` / ``chunked``: :mod:`.bucketed`;
``triton``: the fused kernels of :mod:`.triton`, the score gradients added into their buckets by
atomics; ``triton_stored``: the same kernels, the score gradients stored once and reduced per
bucket by matmuls (:mod:`.triton.score_grads`, no atomics)."""

FLEX_PATHS = ("flex", "flex_gathered")
FUSED_PATHS = ("triton", "triton_stored")

ROTATIONS = ("eager", "compiled")
"""How RoPE turns q and k (:meth:`.terms.Rotation.apply`): eager operations, or one compiled region."""

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

CHUNK_FROM_TOKENS = 320
"""From this sequence length on (e.g. an 18 x 18 grid plus a class token) training with relative
terms runs in query chunks. A pre-norm block with MLP ratio 4 keeps about 16 token-sized (B, N, D)
activations for backward; the stored (B, heads, N, N) weights add N / (16 d) of that: a fifth at
197 tokens, where chunking's recomputation (about a fifth of the attention's time) is not worth it,
three quarters at 785. From 320 tokens on (d = 64, as in every ViT preset) they would add over 30%."""


KINDS = ("bias", "dense", "contextual", "values", "rotation")
"""Kinds of term: ``bias`` a logit per bucket (a dense bias besides it or not); ``dense`` a dense
logit bias only; ``contextual`` a table met by q or k; ``values`` a term on values; ``rotation`` RoPE."""

ANY_DTYPE = "*"

CUDA_TABLE: dict[tuple[str, str, str], str] = {
    # (kind, dtype or "*", token range): path. The measurements: the H100 rows of BENCHMARKS.md,
    # "Earlier GPU measurements" (bf16 DeiT-S training step, 196 tokens, step with the term over the
    # step without it) and one H200 run of ``python -m bench.gpu --quick`` at 196 and 784 tokens
    # (default paths only), which measured no other path.
    ("bias", ANY_DTYPE, "short"): "sdpa",  # bias as a float mask x1.28, FlexAttention reading the table x6.47
    ("bias", ANY_DTYPE, "long"): "sdpa",  # as at 196 tokens (H200: +65% at 784 tokens; no other path timed)
    ("dense", ANY_DTYPE, "short"): "sdpa",  # a float mask is what SDPA takes
    ("dense", ANY_DTYPE, "long"): "sdpa",
    ("contextual", ANY_DTYPE, "short"): "sdpa",  # contextual on k: a (B, heads, N, N) mask x1.60, flex x1.62
    ("contextual", ANY_DTYPE, "long"): "sdpa",  # as at 196 tokens (H200: +190% at 784 tokens)
    ("values", ANY_DTYPE, "short"): "stored",  # neither SDPA nor FlexAttention gives a term on values
    ("values", ANY_DTYPE, "long"): "chunked",  # memory as on CPU (H200: x1.19 the no-PE peak at 784 tokens)
    ("rotation", ANY_DTYPE, "short"): "eager",  # H200: +31% at 196 tokens; the compiled rotation is unmeasured
    ("rotation", ANY_DTYPE, "long"): "eager",
    # measured rows: `python -m bench.quick_report ROWS.json --table --policy THIS_FILE` writes them here
    # end of the measured rows
}
"""The CUDA defaults: (kind of term, dtype name or ``"*"`` for any, token range) -> path (a rotation:
one of :data:`ROTATIONS`). A row for the exact dtype wins over the ``"*"`` row; the rows for one dtype
are written, with their evidence, from the rows of a GPU session (``python -m bench.gpu --session``)."""


def token_range(num_tokens: int) -> str:
    """``"short"`` below :data:`CHUNK_FROM_TOKENS` tokens, ``"long"`` from there."""
    return "long" if num_tokens >= CHUNK_FROM_TOKENS else "short"


def table_path(kind: str, dtype: torch.dtype, num_tokens: int) -> str:
    """The row of :data:`CUDA_TABLE` for ``kind`` at ``dtype`` and ``num_tokens``."""
    name, tokens = str(dtype).removeprefix("torch."), token_range(num_tokens)
    return CUDA_TABLE.get((kind, name, tokens)) or CUDA_TABLE[(kind, ANY_DTYPE, tokens)]


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
    if request.value_term and path in ("sdpa", *FLEX_PATHS):
        return "a term on values needs the attention weights per bucket"
    if path in FLEX_PATHS and request.needs_grad and request.device != "cuda":
        return "FlexAttention's backward runs on CUDA only"
    if path in FUSED_PATHS and request.device == "cuda" and not available():
        return "Triton is not installed (pip install triton)"
    if path in FUSED_PATHS and request.dtype == torch.float64 and runs_kernels(torch.device(request.device)):
        return "the fused kernels compute in float32 and take bf16, fp16 or float32 inputs"
    return None


def kind(request: Request) -> str:
    """The kind of term of ``request`` that decides its path (:data:`KINDS`; a call with terms)."""
    if request.value_term:
        return "values"
    if request.contextual:
        return "contextual"
    return "bias" if request.bucketed else "dense"


def choose_path(request: Request) -> str:
    """The fastest measured path that can compute ``request`` (see the module docstring)."""
    if request.return_weights or (request.dropout and request.value_term):
        return "explicit"
    if request.dropout or not (request.logit_terms or request.value_term):
        return "sdpa"
    if request.device == "cuda":
        chosen = table_path(kind(request), request.dtype, request.num_tokens)
        if chosen == "chunked" and not request.needs_grad:
            chosen = "stored"  # query chunks save the memory that backward keeps; without one, nothing
        if unsupported(chosen, request) is None:
            return chosen
    if not request.needs_grad:
        return "stored" if request.value_term else "sdpa"
    return "chunked" if request.num_tokens >= CHUNK_FROM_TOKENS else "stored"


def rotation_path(device: str, dtype: torch.dtype, num_tokens: int) -> str:
    """How RoPE turns q and k (:data:`ROTATIONS`): the table's row on CUDA, eager elsewhere (on CPU the
    complex multiplication is the fastest form, ``python -m bench.attention.rope``)."""
    return table_path("rotation", dtype, num_tokens) if device == "cuda" else "eager"
