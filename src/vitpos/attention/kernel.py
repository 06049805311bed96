"""The attention kernel: one entry point for every relative encoding, host and device.

:func:`attention` takes q, k, v and an encoding's :class:`~.terms.RelativeTerms`, brings the
per-grid terms (bucket ids, the rotation) to q's device, casts the terms to the dtype attention
computes in (autocast included; autograd casts the gradients back to the tables' dtype), applies
the rotation (eager, or compiled where :func:`.policy.rotation_path` says so), asks :mod:`.policy`
for a path and runs it.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from ..grid import tracing
from .bucketed import bucketed_attention
from .flex import flex_attention, gathered_bias, score_mod
from .policy import SUPPORTED_DTYPES, Request, choose_path, rotation_path, unsupported
from .terms import RelativeTerms
from .triton import fused_attention
from .vmap import VMAP_PATH, under_vmap

__all__ = ["attention"]


def _check_dtypes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.dtype:
    if q.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise TypeError(
            f"attention does not support dtype {str(q.dtype).removeprefix('torch.')}; supported dtypes: {names}"
        )
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    return q.dtype


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    terms: RelativeTerms | None = None,
    *,
    scale: float,
    mask: torch.Tensor | None = None,
    key_padding: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
    path: str | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention of q (B, heads, N, d) over k, v (B, heads, M, d) with the relative ``terms``.

    ``mask``: an additive logit term broadcastable to (B, heads, N, M) (e.g. Swin's
    shifted-window mask; LaPE's bias normalised per image of a padded batch, with its gradient).
    ``key_padding``: (B, M) bool, True at the keys of a padded batch that are padding; they get no
    weight on any path (an additive -inf column joins ``mask``, which every path reads).
    ``return_weights``: also return the softmax weights (B, heads, N, M) (the explicit path).
    ``path``: one of :data:`.policy.PATHS` instead of the
    policy's choice; a path that cannot compute the call falls back, with a warning. Under
    :func:`torch.vmap` every call takes :data:`.vmap.VMAP_PATH`.
    """
    dtype = _check_dtypes(q, k, v)
    if terms is not None:
        terms = terms.on(q.device).to(dtype)
        if terms.rotation is not None:
            how = rotation_path(q.device.type, dtype, q.shape[-2])
            q, k = terms.rotation.apply(q, k, compiled=how == "compiled" and not under_vmap(q, k))
    if key_padding is not None:
        mask = _with_key_padding(mask, key_padding, q)
    if mask is not None:
        mask = mask.to(dtype)
    if under_vmap(q, k, v):
        return _PATHS[VMAP_PATH](q, k, v, terms, scale, mask, dropout_p, return_weights, VMAP_PATH)
    request = Request(
        device=q.device.type,
        dtype=dtype,
        num_tokens=q.shape[-2],
        terms=terms,
        needs_grad=torch.is_grad_enabled()
        and any(t.requires_grad for t in (q, k, v, *(terms.tensors() if terms is not None else ()))),
        dropout=dropout_p > 0,
        return_weights=return_weights,
    )
    chosen = choose_path(request)
    if path is not None:
        reason = unsupported(path, request)
        if reason is None:
            chosen = path
        else:
            warnings.warn(
                f"attention path {path!r} cannot compute this call ({reason}); using {chosen!r}", stacklevel=2
            )
    return _PATHS[chosen](q, k, v, terms, scale, mask, dropout_p, return_weights, chosen)


def _with_key_padding(mask: torch.Tensor | None, key_padding: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``mask`` plus -inf at every padded key: (B, 1, 1, M) broadcast over heads and queries."""
    if key_padding.dtype != torch.bool or key_padding.ndim != 2 or key_padding.shape[0] not in (1, q.shape[0]):
        raise ValueError(
            f"key_padding must be a bool tensor (B, M) = ({q.shape[0]}, M), True at padded keys; "
            f"got {key_padding.dtype} of shape {tuple(key_padding.shape)}"
        )
    column = torch.zeros(key_padding.shape, dtype=q.dtype, device=q.device).masked_fill(key_padding, float("-inf"))
    column = column[:, None, None, :]
    return column if mask is None else mask + column


def _logit_mask(q, k, terms: RelativeTerms | None, scale: float, mask: torch.Tensor | None) -> torch.Tensor | None:
    """The logit terms and the mask as one float mask broadcastable to (B, heads, N, M)."""
    extra = None if terms is None else terms.logits(q, k, scale)
    if mask is None:
        return extra
    return mask if extra is None else extra + mask


def _content_query(q: torch.Tensor, terms: RelativeTerms | None) -> torch.Tensor:
    return q if terms is None else terms.content_query(q)


def _sdpa(q, k, v, terms, scale, mask, dropout_p, return_weights, path):
    bias = _logit_mask(q, k, terms, scale, mask)
    if bias is not None and tracing():
        # a mask broadcast over the batch makes the tracer guard on whether the (symbolic) batch is 1
        bias = bias.expand(q.shape[0], *bias.shape[1:])
    return F.scaled_dot_product_attention(
        _content_query(q, terms), k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale
    )


def _explicit(q, k, v, terms, scale, mask, dropout_p, return_weights, path):
    logits = (_content_query(q, terms) * scale) @ k.transpose(-2, -1)
    bias = _logit_mask(q, k, terms, scale, mask)
    if bias is not None:
        logits = logits + bias
    weights = logits.softmax(dim=-1)
    kept = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = kept @ v
    if terms is not None and terms.value_term:
        out = out + terms.values(kept)
    return (out, weights) if return_weights else out


def _flex(q, k, v, terms, scale, mask, dropout_p, return_weights, path):
    row = col = None
    if terms is not None and path == "flex_gathered":
        terms = gathered_bias(terms)
    if terms is not None:
        row, col = terms.scores(q, k, scale)
    bias = None if terms is None or terms.bias is None else terms.bias.unsqueeze(0)
    if mask is not None:
        bias = mask if bias is None else bias + mask
    mod = score_mod(None if terms is None else terms.ids, row, col, bias)
    return flex_attention(_content_query(q, terms), k, v, mod, scale)


def _bucket_inputs(q, k, terms: RelativeTerms | None, scale: float, mask: torch.Tensor | None):
    """The inputs of the bucketed and fused paths: ids, bucket count, row and column scores, and the
    dense bias with the mask."""
    if terms is None:
        return None, 0, None, None, mask
    row, col = terms.scores(q, k, scale)
    bias = mask if terms.bias is None else terms.bias if mask is None else terms.bias + mask
    return terms.ids, terms.num_buckets, row, col, bias


def _with_values(out: torch.Tensor, weights: torch.Tensor | None, terms: RelativeTerms | None) -> torch.Tensor:
    """out + the value term from the weights summed per bucket (B, heads, N, K)."""
    if weights is None:
        return out
    assert terms is not None and terms.value_table is not None  # the weights were asked for the value term
    return out + weights @ terms.value_table


def _bucketed(q, k, v, terms, scale, mask, dropout_p, return_weights, path):
    ids, num_buckets, row, col, bias = _bucket_inputs(q, k, terms, scale, mask)
    out, weights = bucketed_attention(
        _content_query(q, terms), k, v, scale, ids, num_buckets=num_buckets, row_scores=row, col_scores=col,
        bias=bias, bucket_weights=terms is not None and terms.value_term, mode=path,
    )  # fmt: skip
    return _with_values(out, weights, terms)


def _triton(q, k, v, terms, scale, mask, dropout_p, return_weights, path):
    ids, num_buckets, row, col, bias = _bucket_inputs(q, k, terms, scale, mask)
    out, weights = fused_attention(
        _content_query(q, terms), k, v, scale, ids, num_buckets=num_buckets, row_scores=row, col_scores=col,
        bias=bias, bucket_weights=terms is not None and terms.value_term,
        score_grads="stored" if path == "triton_stored" else "atomic",
    )  # fmt: skip
    return _with_values(out, weights, terms)


_PATHS = {
    "sdpa": _sdpa, "explicit": _explicit, "flex": _flex, "flex_gathered": _flex, "stored": _bucketed,
    "chunked": _bucketed, "triton": _triton, "triton_stored": _triton,
}  # fmt: skip
