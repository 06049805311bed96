"""The flex path's head padding: FlexAttention's compiled kernel needs heads of a power-of-two width of at
least 16 (``tl.dot``); narrower heads are padded with zero channels and give the same attention."""

from __future__ import annotations

import pytest
import torch

from vitpos.attention import flex
from vitpos.attention.kernel import attention

from .test_kernel import qkv, random_terms


@pytest.mark.parametrize("d,width", [(1, 16), (8, 16), (16, 16), (24, 32), (64, 64), (80, 128)])
def test_head_width(d, width):
    assert flex.head_width(d) == width


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")  # eager on CPU, as meant
def test_narrow_heads_reach_flex_attention_padded_and_give_the_same_output(monkeypatch):
    terms, (q, k, v) = random_terms(value=False, dtype=torch.float32), qkv(torch.float32)
    widths = []
    run = flex._flex_attention

    def recording(q, k, v, **kwargs):
        widths.append((q.shape[-1], k.shape[-1], v.shape[-1]))
        return run(q, k, v, **kwargs)

    with torch.no_grad():
        expected = attention(q, k, v, terms, scale=0.3, path="explicit")
        monkeypatch.setattr(flex, "_flex_attention", recording)
        out = attention(q, k, v, terms, scale=0.3, path="flex")
    assert widths == [(16, 16, 16)] and out.shape == q.shape  # heads of 8 channels, padded to 16
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_a_new_score_mod_of_the_same_form_reuses_the_compiled_graph(monkeypatch):
    """Every call builds its ``score_mod`` (every layer, every step): one compile serves them all."""
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    monkeypatch.setattr(flex, "_flex_attention", torch.compile(flex._flex_attention, backend=counter, dynamic=False))
    with torch.no_grad():
        for seed in range(3):
            torch.manual_seed(seed)
            terms, (q, k, v) = random_terms(value=False, dtype=torch.float32), qkv(torch.float32)
            q, k, v = (torch.randn_like(t) for t in (q, k, v))  # new queries: new row and column scores
            out = attention(q, k, v, terms, scale=0.3, path="flex")
            torch.testing.assert_close(out, attention(q, k, v, terms, scale=0.3, path="explicit"), rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 1
