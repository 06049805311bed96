"""Float64 attention with every term gathered at every (query, key) pair: the tests' reference."""

from __future__ import annotations

import torch

from vitpos.attention import RelativeTerms


def assert_relative(got: torch.Tensor, want: torch.Tensor, tol: float, what: str = "") -> None:
    """max |got - want| <= tol * max |want| (and want is not all zero, so the check means something)."""
    scale = want.detach().abs().max().item()
    assert scale > 0, f"{what}: the reference is zero everywhere"
    err = (got.detach().double() - want.detach().double()).abs().max().item()
    assert err <= tol * scale, f"{what}: max error {err:.2e} over max {scale:.2e} exceeds {tol:.0e}"


def _per_head(table: torch.Tensor, heads: int) -> torch.Tensor:  # heads, K, d
    return (table if table.ndim == 3 else table[None]).expand(heads, -1, -1)


def gather_logits(ids, row=None, col=None) -> torch.Tensor:
    """sum_m R[..., i, I_m(i, j)] + C[..., j, I_m(i, j)] for row (.., N or 1, K) and col (.., M, K) scores."""
    total = 0
    for id_map in ids if ids.ndim == 3 else ids[None]:
        if row is not None:
            total = total + row.expand(*row.shape[:-2], id_map.shape[0], -1).gather(
                -1, id_map.expand(*row.shape[:-2], -1, -1)
            )
        if col is not None:
            total = total + col.gather(-1, id_map.T.expand(*col.shape[:-2], -1, -1)).transpose(-2, -1)
    return total


def literal_attention(q, k, v, terms: RelativeTerms, scale: float, mask=None) -> torch.Tensor:
    """Attention of (B, heads, N, d) inputs with ``terms`` and an additive ``mask``, in float64."""
    q, k, v = (x.double() for x in (q, k, v))
    t = terms.to(torch.float64)
    heads = q.shape[1]
    logits = scale * t.content_query(q) @ k.transpose(-2, -1)
    maps = t.ids if t.ids.ndim == 3 else t.ids[None]
    for ids in maps:
        if t.bias_table is not None:
            logits = logits + t.bias_table[:, ids]
        if t.key_table is not None:
            logits = logits + scale * torch.einsum("bhid,hijd->bhij", q, _per_head(t.key_table, heads)[:, ids])
        if t.query_table is not None:
            logits = logits + scale * torch.einsum("bhjd,hijd->bhij", k, _per_head(t.query_table, heads)[:, ids])
    if t.bias is not None:
        logits = logits + t.bias
    if mask is not None:
        logits = logits + mask.double()
    weights = logits.softmax(-1)
    out = weights @ v
    if t.value_table is not None:
        for ids in maps:
            out = out + torch.einsum("bhij,hijd->bhid", weights, _per_head(t.value_table, heads)[:, ids])
    return out
