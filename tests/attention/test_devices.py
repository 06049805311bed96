"""Terms built on another device than the queries: the per-grid ids and rotation are copied to q's
device once per grid and device; a table elsewhere is an error naming it and both devices."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from vitpos.attention import attention
from vitpos.encodings.base import SlotContext
from vitpos.errors import VitposError
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

from .test_kernel import B, D, H, N, qkv, random_terms

META = torch.device("meta")


def encoding(spec_text: str, grid=(3, 3), prefix=0):
    spec = SlotSpec.parse(spec_text)
    return RELATIVE.get(spec.name).from_spec(spec, SlotContext(H * D, H, 1, grid, prefix))


def test_cpu_ids_meet_queries_on_another_device():
    terms = random_terms(value=False, dtype=torch.float32)
    tables = {name: getattr(terms, name).detach().to(META) for name in ("bias_table", "key_table", "query_table")}
    terms = replace(terms, bias=None, query_shift=None, **tables)
    q, k, v = (t.detach().float().to(META) for t in qkv())
    assert terms.ids is not None and terms.ids.device.type == "cpu"
    out = attention(q, k, v, terms, scale=0.3, path="explicit")
    assert out.device == META and out.shape == (B, H, N, D)
    moved = terms.on(META)
    assert moved.ids is not None and moved.ids.device == META and moved.ids.dtype == terms.ids.dtype
    assert terms.on(META).ids is moved.ids  # copied once per grid and device
    assert moved.on(META) is moved  # nothing to copy


def test_a_rotation_built_on_the_cpu_turns_queries_elsewhere():
    terms = encoding("rope2d").relative_terms((3, 3), 0)
    assert terms.rotation is not None and terms.rotation.cos_sin.device.type == "cpu"
    q = torch.randn(B, H, N, D, device=META)
    assert attention(q, q, q, terms, scale=0.3).device == META
    moved = terms.on(META).rotation
    assert moved is not None and moved.cos_sin.device == META


@pytest.mark.parametrize("name", ["bias_table", "key_table", "bias"])
def test_a_table_on_another_device_is_named_with_both_devices(name):
    terms = random_terms(value=False, dtype=torch.float32)
    q, k, v = (t.detach().float().to(META) for t in qkv())
    others = {n: getattr(terms, n).detach().to(META) for n in ("bias_table", "key_table", "query_table", "bias")}
    terms = replace(terms, query_shift=None, **{**others, name: getattr(terms, name)})
    with pytest.raises(VitposError, match=f"relative terms: {name} is on cpu but the queries are on meta; move"):
        attention(q, k, v, terms, scale=0.3, path="explicit")
