"""DeiT + iRPE presets: parameter totals from the table shapes, bucket counts in their names."""

import re

import pytest
import torch

import vitpos
from vitpos.models.presets.irpe import IRPE_PRESETS

DEIT = {"tiny": 5_717_416, "small": 22_050_664, "base": 86_567_656}
LAYERS, HEAD_DIM = 12, 64  # every DeiT size has 12 layers of 64-wide heads


def table_rows(ratio: float, per_table: int = 1) -> int:
    """2 floor(2 ratio) + 1 buckets per table, plus the class-token bucket."""
    return per_table * (2 * int(2 * ratio) + 1 + 1)


EXPECTED = {
    # contextual, shared, on k, 50 buckets: 12 * 64 * 50 = 38,400 (iRPE Table 2: 22.05M -> 22.09M)
    "deit_tiny_patch16_224_ctx_product_50_shared_k": DEIT["tiny"] + LAYERS * HEAD_DIM * 50,
    "deit_small_patch16_224_ctx_product_50_shared_k": DEIT["small"] + LAYERS * HEAD_DIM * 50,
    "deit_small_patch16_224_ctx_product_50_shared_qk": DEIT["small"] + 2 * LAYERS * HEAD_DIM * 50,
    "deit_small_patch16_224_ctx_product_50_shared_qkv": DEIT["small"] + 3 * LAYERS * HEAD_DIM * 50,
    "deit_base_patch16_224_ctx_product_50_shared_k": DEIT["base"] + LAYERS * HEAD_DIM * 50,
    "deit_base_patch16_224_ctx_product_50_shared_qkv": DEIT["base"] + 3 * LAYERS * HEAD_DIM * 50,
    # the other methods keep 2 floor(beta) + 1 (+1) rows per table, used on 14x14 or not
    "deit_small_patch16_224_ctx_euc_20_shared_k": DEIT["small"] + LAYERS * HEAD_DIM * table_rows(20),  # 82 rows
    "deit_small_patch16_224_ctx_quant_51_shared_k": DEIT["small"] + LAYERS * HEAD_DIM * table_rows(33),  # 134 rows
    "deit_small_patch16_224_ctx_cross_56_shared_k": DEIT["small"] + LAYERS * HEAD_DIM * table_rows(20, 2),  # 2 x 82
}


def test_every_preset_is_checked():
    assert set(EXPECTED) == set(IRPE_PRESETS) == set(vitpos.list_models("*_ctx_*", task="classification"))


def meta_model(name: str) -> torch.nn.Module:
    with torch.device("meta"):
        return vitpos.create_model(name)


def count(model: torch.nn.Module, part: str = "") -> int:
    return sum(p.numel() for n, p in model.named_parameters() if part in n)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_totals(name):
    assert count(meta_model(name)) == EXPECTED[name]


def test_the_headline_numbers():
    """iRPE Table 2: DeiT-S grows from 22.05M to 22.09M with shared contextual product tables on k."""
    irpe = meta_model("deit_small_patch16_224_ctx_product_50_shared_k")
    assert count(irpe) - count(meta_model("deit_small_patch16_224")) == 38_400
    assert count(irpe, part=".relative.") == 38_400  # the tables are all that was added
    assert count(irpe) == 22_089_064


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_name_states_buckets_used_on_14x14_and_the_targets(name):
    method, count, targets = re.search(r"_ctx_(euc|quant|cross|product)_(\d+)_shared_(q?k?v?)$", name).groups()
    cfg = vitpos.get_config(name)
    assert cfg.grid == (14, 14) and cfg.num_prefix_tokens == 1
    assert cfg.position.absolute == "learned" and cfg.position.join == "input"
    model = vitpos.create_model(name, depth=1)
    rel = model.stages[0].blocks[0].attn.relative
    assert rel.options.method == {"euc": "euclidean"}.get(method, method)
    assert rel.options.on == targets and rel.options.mode == "ctx" and rel.options.shared
    assert rel.bucket_ids((14, 14), 1, "cpu").unique().numel() == int(count)


def test_paper_quantization_at_ratio_29_also_uses_51_buckets():
    ids, _ = vitpos.relative_buckets("quant", (14, 14), ratio=29, num_prefix_tokens=1)
    assert ids.unique().numel() == 51
