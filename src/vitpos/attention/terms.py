"""What a relative encoding adds to attention: :class:`RelativeTerms`, built per grid and prefix count.

An encoding declares its terms and computes no attention; :func:`vitpos.attention.attention`
consumes them. Every term is in logit units (after the 1/sqrt(d) scale of q . k), with N the
number of tokens (prefix tokens first), K the number of buckets, d the head width:

    logit_ij = scale (q_i + u) . k_j                                   content (u: ``query_shift``)
             + sum_m b[I_m(i, j)]                                      ``bias_table`` (heads or 1, K)
             + scale q_i . P^K[I_m(i, j)] + scale k_j . P^Q[I_m(i, j)]  ``key_table`` / ``query_table``
             + B_ij                                                    ``bias`` (heads or 1, N, N)
    out_i    = sum_j a_ij v_j + sum_j a_ij P^V[I(i, j)]                ``value_table``

with q and k first turned by ``rotation`` (RoPE) and I_m the bucket-id maps ``ids`` (one, or two
for the Cross method, summed). Tables are (K, d) shared by the heads or (heads, K, d).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch
from torch.utils.weak import WeakTensorKeyDictionary

from ..compile_cache import compile_privately
from ..errors import VitposError
from ..grid import tracing
from .bucket_lookup import BucketIndex, lookup

__all__ = ["Rotation", "RelativeTerms", "bucket_maps", "rotate"]


def bucket_maps(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The (N, N) id maps whose lookups are summed: one, or two for the Cross method."""
    return tuple(ids) if ids.ndim == 3 else (ids,)


def _lookup(scores: torch.Tensor, index: torch.Tensor, cols: int) -> torch.Tensor:
    """:func:`.bucket_lookup.lookup`; with a gradient in bf16 / fp16 it reads float32 scores, so that
    backward sums each bucket's hundreds of pair gradients in float32."""
    if scores.requires_grad and scores.dtype in (torch.bfloat16, torch.float16):
        return lookup(scores.float(), index, cols).to(scores.dtype)
    return lookup(scores, index, cols)


_COPIES: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
"""Per-grid tensors (bucket ids, RoPE's cos/sin) copied to another device or dtype: {tensor: {target: copy}}."""


def _copied(t: torch.Tensor, device: torch.device | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``t`` on ``device`` in ``dtype``, copied once per target while ``t`` lives (the per-grid caches
    keep it); a tensor with a gradient (learned frequencies) is copied every time."""
    device, dtype = device or t.device, dtype or t.dtype
    if (device, dtype) == (t.device, t.dtype):
        return t
    if t.requires_grad or tracing():
        return t.to(device, dtype)
    copies = _COPIES.setdefault(t, {})
    if (device, dtype) not in copies:
        copy = t.to(device, dtype)
        if copy is t:  # the same place said otherwise ("cuda" for "cuda:0"): nothing to keep
            return t
        copies[(device, dtype)] = copy
    return copies[(device, dtype)]


def _given(x: torch.Tensor | None, what: str) -> torch.Tensor:
    """``x``, which a contextual term needs; a ValueError naming ``what`` if it is None."""
    if x is None:
        raise ValueError(f"these relative terms meet the {what}: pass them, not None")
    return x


@dataclass(frozen=True)
class Rotation:
    """A rotation of channel pairs (2t, 2t+1) of the patch tokens' queries and keys (RoPE).

    ``cos_sin`` (2, heads or 1, H*W, d/2) holds the cosines and sines of every pair's angle at
    every cell; the first ``num_prefix_tokens`` tokens are not rotated.
    """

    cos_sin: torch.Tensor
    num_prefix_tokens: int

    def to(self, dtype: torch.dtype) -> Rotation:
        """The rotation for queries in ``dtype``: its tables in ``dtype``, at least float32 (the
        turn is computed in that precision and rounded once)."""
        return replace(self, cos_sin=_copied(self.cos_sin, dtype=torch.promote_types(dtype, torch.float32)))

    def apply(self, q: torch.Tensor, k: torch.Tensor, compiled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated (q, k), both (B, heads, N, d), in one step over both.

        Eager: one complex multiplication of the stacked pairs (``python -m bench.attention.rope``: x0.15 to
        x0.31 the time of rotating q and k apart in real arithmetic, DeiT-S shapes, one CPU
        thread, two runs on a shared machine). Traced by ``torch.compile``, or ``compiled``: the
        same in real arithmetic, which Inductor fuses into one kernel forward and one backward
        (it generates no code for complex operations); ``compiled`` runs that region compiled
        once per prefix count (the policy's :func:`~.policy.rotation_path`).
        """
        if torch.compiler.is_compiling():
            return rotate(q, k, self.cos_sin, self.num_prefix_tokens, False)
        if compiled:
            return _compiled_rotate()(q, k, self.cos_sin, self.num_prefix_tokens, False)
        return rotate(q, k, self.cos_sin, self.num_prefix_tokens, True)


def rotate(
    q: torch.Tensor, k: torch.Tensor, cos_sin: torch.Tensor, num_prefix_tokens: int, in_complex: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k turned by ``cos_sin`` (2, heads or 1, cells, d/2) past the prefix tokens, computed in
    ``cos_sin``'s dtype and rounded once: as complex numbers or in real arithmetic."""
    p = num_prefix_tokens
    both = torch.stack([q, k])  # 2, B, heads, N, d: one contiguous copy of both
    cells = both[..., p:, :].to(cos_sin.dtype)
    cos, sin = cos_sin.unbind(0)
    if in_complex:
        pairs = torch.view_as_complex(cells.unflatten(-1, (-1, 2)).contiguous())
        turned = torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2)
    else:
        even, odd = cells.unflatten(-1, (-1, 2)).unbind(-1)
        turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    turned = turned.to(q.dtype)
    if p:
        turned = torch.cat([both[..., :p, :], turned], dim=-2)
    return turned[0], turned[1]


@functools.cache
def _compiled_rotate() -> Callable:
    """:func:`rotate` compiled (once per process; shapes that change are made dynamic)."""
    return compile_privately(rotate, fullgraph=True)


@dataclass(frozen=True)
class RelativeTerms:
    """The terms of one relative encoding for one grid and prefix count (see the module docstring)."""

    ids: torch.Tensor | None = None
    """Bucket ids (N, N), or (2, N, N) for the Cross method; needed by every table below."""
    num_buckets: int = 0
    bias_table: torch.Tensor | None = None
    """A logit per bucket: (heads or 1, K)."""
    key_table: torch.Tensor | None = None
    """Encodings of keys, met by the queries: (K, d) or (heads, K, d)."""
    query_table: torch.Tensor | None = None
    """Encodings of queries, met by the keys: (K, d) or (heads, K, d)."""
    value_table: torch.Tensor | None = None
    """Encodings of values, summed with the attention weights: (K, d) or (heads, K, d)."""
    bias: torch.Tensor | None = None
    """A dense logit bias (heads or 1, N, N) that has no bucket form (e.g. LaPE's normalised bias)."""
    query_shift: torch.Tensor | None = None
    """u (d,) in the content product (q + u) . k (Transformer-XL)."""
    rotation: Rotation | None = None

    def __post_init__(self) -> None:
        tables = [n for n in ("bias_table", "key_table", "query_table", "value_table") if getattr(self, n) is not None]
        if tables and self.ids is None:
            raise ValueError(f"relative terms {', '.join(tables)} are looked up by bucket id: give ids and num_buckets")

    @property
    def logit_terms(self) -> bool:
        """True if any term adds to the logits beyond the content product."""
        return any(t is not None for t in (self.bias_table, self.key_table, self.query_table, self.bias))

    @property
    def contextual(self) -> bool:
        """True if a logit term depends on the queries or keys (a table met by q or k)."""
        return self.key_table is not None or self.query_table is not None

    @property
    def value_term(self) -> bool:
        """True if a term is added to the values (it needs the attention weights per bucket)."""
        return self.value_table is not None

    def tensors(self) -> list[torch.Tensor]:
        """Every floating-point tensor the terms hold."""
        out = [getattr(self, f.name) for f in fields(self) if f.name not in ("ids", "num_buckets", "rotation")]
        if self.rotation is not None:
            out.append(self.rotation.cos_sin)
        return [t for t in out if t is not None]

    def to(self, dtype: torch.dtype) -> RelativeTerms:
        """The same terms with every table in ``dtype`` (autograd casts the gradients back)."""
        changes = {
            f.name: getattr(self, f.name).to(dtype)
            for f in fields(self)
            if f.name not in ("ids", "num_buckets", "rotation") and getattr(self, f.name) is not None
        }
        if self.rotation is not None:
            changes["rotation"] = self.rotation.to(dtype)
        return replace(self, **changes)

    def on(self, device: torch.device) -> RelativeTerms:
        """The terms on ``device`` (the queries'): the bucket ids and the rotation, built per grid, are
        copied there once per grid and device; a table elsewhere raises an error naming it."""
        for f in fields(self):
            t = getattr(self, f.name)
            if isinstance(t, torch.Tensor) and f.name != "ids" and t.device != device:
                raise VitposError(
                    f"relative terms: {f.name} is on {t.device} but the queries are on {device}; "
                    f"move the encoding to the model's device (model.to({str(device)!r}))"
                )
        changes: dict = {}
        if self.ids is not None and self.ids.device != device:
            changes["ids"] = _copied(self.ids, device)
        if self.rotation is not None and self.rotation.cos_sin.device != device:
            changes["rotation"] = replace(self.rotation, cos_sin=_copied(self.rotation.cos_sin, device))
        return replace(self, **changes) if changes else self

    def content_query(self, q: torch.Tensor) -> torch.Tensor:
        """The queries of the content product: q, or q + u."""
        return q if self.query_shift is None else q + self.query_shift

    def scores(
        self, q: torch.Tensor | None, k: torch.Tensor | None, scale: float
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Per-bucket scores (Eq. 27): rows R (..., N or 1, K) looked up per query and columns
        C (..., N, K) looked up per key; None where there is no such term. ``q`` and ``k`` may be
        None where no table meets them."""
        row = None if self.key_table is None else _given(q, "queries") @ (self.key_table * scale).transpose(-2, -1)
        if self.bias_table is not None:
            table = self.bias_table[None, :, None, :]  # 1, heads or 1, 1, K
            row = table if row is None else row + table
        col = None if self.query_table is None else _given(k, "keys") @ (self.query_table * scale).transpose(-2, -1)
        return row, col

    def logits(self, q: torch.Tensor | None, k: torch.Tensor | None, scale: float) -> torch.Tensor | None:
        """Every logit term but the content product (whose query shift :meth:`content_query` applies)
        as one (B or 1, heads or 1, N, N) tensor, or None. ``q`` and ``k`` may be None where no
        table meets them (a bias only)."""
        row, col = self.scores(q, k, scale)
        out = None
        if row is not None or col is not None:
            assert self.ids is not None  # a table is set, so __post_init__ checked the ids
            index, everything, n = BucketIndex(self.ids, self.num_buckets), slice(None), self.ids.shape[-1]
            if row is not None:
                out = _lookup(row, index.rows(everything, per_query=row.shape[-2] != 1), n)
            if col is not None:
                term = _lookup(col, index.columns(everything), n)
                out = term if out is None else out + term
        if self.bias is not None:
            out = self.bias.unsqueeze(0) if out is None else out + self.bias
        return out

    def values(self, weights: torch.Tensor) -> torch.Tensor:
        """sum_j a_ij P^V[I(i, j)] (Eq. 17) from the weights (B, heads, N, N): summed per bucket, then one matmul."""
        if self.value_table is None:
            raise ValueError("these relative terms have no value_table: check value_term before calling values")
        assert self.ids is not None  # value_table is set, so __post_init__ checked the ids
        per_bucket = weights.new_zeros(*weights.shape[:-1], self.num_buckets)
        for id_map in bucket_maps(self.ids):
            per_bucket = per_bucket.scatter_add(-1, id_map.expand_as(weights), weights)
        return per_bucket @ self.value_table
