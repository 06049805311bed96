"""The kernel's policy, its fallbacks (a term is never dropped), dtype errors and the weights it returns."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch

from vitpos.attention import PATHS, SUPPORTED_DTYPES, RelativeTerms, attention, policy
from vitpos.attention.policy import CHUNK_FROM_TOKENS, FLEX_PATHS, Request, choose_path, unsupported
from vitpos.attention.triton import op

B, H, N, D, K = 2, 2, 9, 8, 5


def random_terms(value: bool = True, contextual: bool = True, dtype=torch.float64, device="cpu") -> RelativeTerms:
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device).requires_grad_()

    return RelativeTerms(
        ids=torch.randint(0, K, (N, N), generator=gen).to(device), num_buckets=K, bias_table=rand(H, K),
        key_table=rand(K, D) if contextual else None, query_table=rand(H, K, D) if contextual else None,
        value_table=rand(K, D) if value else None, bias=rand(1, N, N), query_shift=rand(D),
    )  # fmt: skip


def qkv(dtype=torch.float64, device="cpu"):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(B, H, N, D, generator=gen, dtype=dtype).to(device).requires_grad_() for _ in range(3)]


def request(device="cpu", terms=None, tokens=N, grad=True, dropout=False, weights=False) -> Request:
    return Request(device, torch.float32, tokens, terms, grad, dropout, weights)


def test_policy_per_device():
    ctx, with_values = random_terms(False), random_terms()
    assert choose_path(request(terms=None)) == "sdpa"
    assert choose_path(request(terms=RelativeTerms())) == "sdpa"  # a rotation only
    assert choose_path(request(terms=ctx, weights=True)) == "explicit"
    assert choose_path(request(terms=with_values, dropout=True)) == "explicit"
    assert choose_path(request(terms=ctx, dropout=True)) == "sdpa"
    # CPU: stored weights below CHUNK_FROM_TOKENS, query chunks from there; SDPA in inference
    assert choose_path(request(terms=ctx, tokens=CHUNK_FROM_TOKENS - 1)) == "stored"
    assert choose_path(request(terms=ctx, tokens=CHUNK_FROM_TOKENS)) == "chunked"
    assert choose_path(request(terms=ctx, grad=False)) == "sdpa"
    assert choose_path(request(terms=with_values, grad=False)) == "stored"
    for r in (request(terms=ctx), request("cuda", with_values), request(terms=with_values, weights=True)):
        assert unsupported(choose_path(r), r) is None  # the policy only picks a path that can


@pytest.mark.parametrize("installed", [True, False])
def test_policy_on_cuda_with_and_without_triton(monkeypatch, installed):
    bias_only, ctx, with_values = random_terms(False, False), random_terms(False), random_terms()
    dense = RelativeTerms(bias=torch.zeros(1, N, N))
    for module in (policy, op):
        monkeypatch.setattr(module, "available", lambda: installed)
    # the earlier H100 rows: bias and contextual terms through SDPA, values as on CPU
    assert choose_path(request("cuda", bias_only)) == choose_path(request("cuda", bias_only, grad=False)) == "sdpa"
    assert choose_path(request("cuda", ctx)) == choose_path(request("cuda", ctx, grad=False)) == "sdpa"
    assert choose_path(request("cuda", dense)) == "sdpa"
    assert (
        choose_path(request("cuda", with_values)) == choose_path(request("cuda", with_values, grad=False)) == "stored"
    )
    assert choose_path(request("cuda", with_values, tokens=CHUNK_FROM_TOKENS)) == "chunked"
    assert choose_path(request("cuda", with_values, dropout=True)) == "explicit"
    assert (unsupported("triton", request("cuda", ctx)) is None) == installed  # forceable where installed
    if not installed:
        assert "Triton is not installed" in unsupported("triton", request("cuda", ctx))


def test_the_cuda_policy_reads_its_table(monkeypatch):
    bias_only, ctx, with_values = random_terms(False, False), random_terms(False), random_terms()
    dense = RelativeTerms(bias=torch.zeros(1, N, N))
    assert [policy.kind(request("cuda", t)) for t in (bias_only, dense, ctx, with_values)] == [
        "bias", "dense", "contextual", "values",
    ]  # fmt: skip
    assert {kind for kind, _, _ in policy.CUDA_TABLE} == set(policy.KINDS)
    for kind in policy.KINDS:  # every kind has a row for any dtype in both token ranges
        assert {(kind, "*", "short"), (kind, "*", "long")} <= policy.CUDA_TABLE.keys()
    assert policy.token_range(CHUNK_FROM_TOKENS - 1) == "short" and policy.token_range(CHUNK_FROM_TOKENS) == "long"
    # a row for one dtype wins over the row for any dtype; a path that cannot compute the call is passed over
    monkeypatch.setitem(policy.CUDA_TABLE, ("contextual", "bfloat16", "short"), "flex")
    monkeypatch.setitem(policy.CUDA_TABLE, ("bias", "*", "long"), "stored")
    bf16 = Request("cuda", torch.bfloat16, N, ctx, True, False, False)
    assert choose_path(bf16) == "flex" and choose_path(request("cuda", ctx)) == "sdpa"
    assert choose_path(request("cuda", bias_only, tokens=CHUNK_FROM_TOKENS)) == "stored"
    assert choose_path(request("cuda", bias_only)) == "sdpa"
    monkeypatch.setitem(policy.CUDA_TABLE, ("values", "*", "short"), "sdpa")  # SDPA gives no value term
    assert choose_path(request("cuda", with_values)) == "stored"
    assert choose_path(request("cuda", with_values, tokens=CHUNK_FROM_TOKENS, grad=False)) == "stored"


def test_the_cuda_default_is_never_the_unmeasured_fused_path(monkeypatch):
    for module in (policy, op):
        monkeypatch.setattr(module, "available", lambda: True)
    chosen = set()
    for terms in (random_terms(False, False), random_terms(False), random_terms(), random_terms(True, False)):
        for dtype in SUPPORTED_DTYPES:
            for tokens in (1, 50, 197, CHUNK_FROM_TOKENS, 785, 3137):
                for grad, dropout in ((True, False), (False, False), (True, True)):
                    r = Request("cuda", dtype, tokens, terms, grad, dropout, False)
                    chosen.add(choose_path(r))
                    assert choose_path(r) != "triton", r
                    if not dropout and dtype != torch.float64:
                        assert unsupported("triton", r) is None  # still forceable
    assert chosen == {"sdpa", "stored", "chunked", "explicit"}


def test_what_each_path_cannot_give():
    values = random_terms()
    assert "values" in unsupported("sdpa", request(terms=values))
    assert "values" in unsupported("flex", request("cuda", values))
    assert "CUDA" in unsupported("flex", request(terms=random_terms(False)))
    assert "weights" in unsupported("chunked", request(weights=True))
    assert "dropout" in unsupported("stored", request(dropout=True))
    with pytest.raises(ValueError, match="unknown attention path 'flash'; valid paths: sdpa, flex"):
        unsupported("flash", request())


def reference(q, k, v, terms: RelativeTerms, scale: float) -> torch.Tensor:
    """The terms written out with gathers over full (B, heads, N, N) tensors."""
    ids = terms.ids
    logits = scale * (q + terms.query_shift) @ k.transpose(-2, -1) + terms.bias
    logits = logits + terms.bias_table[:, ids]
    logits = logits + scale * torch.einsum("bhid,ijd->bhij", q, terms.key_table[ids])
    logits = logits + scale * torch.einsum("bhjd,hijd->bhij", k, terms.query_table[:, ids])
    weights = logits.softmax(-1)
    return weights @ v + torch.einsum("bhij,ijd->bhid", weights, terms.value_table[ids])


@pytest.mark.parametrize("path", PATHS)
def test_a_path_that_cannot_give_a_term_falls_back_and_keeps_it(path):
    terms, (q, k, v) = random_terms(), qkv()
    expected = reference(q, k, v, terms, 0.3)
    leaves = [q, k, v, *terms.tensors()]
    expected_grads = torch.autograd.grad(expected.sum(), leaves)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = attention(q, k, v, terms, scale=0.3, path=path)
    fell_back = [w for w in caught if "cannot compute this call" in str(w.message)]
    assert bool(fell_back) == (path in ("sdpa", *FLEX_PATHS))  # the value term; flex also lacks a CPU backward
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)
    for got, want in zip(torch.autograd.grad(out.sum(), leaves), expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def test_flex_forward_on_cpu_equals_the_reference_without_a_value_term():
    terms, (q, k, v) = random_terms(value=False), qkv(torch.float32)
    terms = terms.to(torch.float32)
    expected = reference(q, k, v, replace(terms, value_table=torch.zeros(K, D)), 0.3)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = attention(q, k, v, terms, scale=0.3, path="flex")
    assert not [w for w in caught if "cannot compute this call" in str(w.message)]  # no fallback
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_weights_come_back_from_every_request_and_sum_to_one():
    terms, (q, k, v) = random_terms(), qkv()
    with pytest.warns(UserWarning, match="only the explicit path returns the attention weights"):
        out, weights = attention(q, k, v, terms, scale=0.3, return_weights=True, path="chunked")
    assert weights.shape == (B, H, N, N)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, N, dtype=torch.float64))
    torch.testing.assert_close(out, reference(q, k, v, terms, 0.3))


@pytest.mark.parametrize("dtype", [torch.int64, torch.complex64, torch.float8_e4m3fn])
def test_an_unsupported_dtype_is_named_with_the_supported_ones(dtype):
    q = torch.zeros(1, 1, 3, 4).to(dtype)
    supported = "float32, float64, bfloat16, float16"
    message = f"does not support dtype {str(dtype).removeprefix('torch.')}; supported dtypes: {supported}"
    with pytest.raises(TypeError, match=message):
        attention(q, q, q, scale=1.0)


def test_mixed_qkv_dtypes_are_refused():
    q = torch.zeros(1, 1, 3, 4)
    with pytest.raises(TypeError, match="q, k and v must share one dtype"):
        attention(q, q.double(), q, scale=1.0)


def test_terms_without_ids_are_refused():
    with pytest.raises(ValueError, match="bias_table are looked up by bucket id: give ids"):
        RelativeTerms(bias_table=torch.zeros(1, 3))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("path", ["sdpa", "explicit", "stored", "chunked"])
def test_reduced_precision_tables_get_float32_gradients(path, dtype):
    terms = random_terms(value=path not in ("sdpa",), dtype=torch.float32)
    q, k, v = (t.detach().to(dtype).requires_grad_() for t in qkv(torch.float32))
    out = attention(q, k, v, terms, scale=0.3, path=path)
    assert out.dtype == dtype
    out.float().sum().backward()
    for table in terms.tensors():
        assert table.grad is not None and table.grad.dtype == torch.float32 and torch.isfinite(table.grad).all()
