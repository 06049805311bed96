"""The atomic-free per-bucket reductions of the fused backward equal a scatter-add of every score gradient."""

from __future__ import annotations

import pytest
import torch

from vitpos.attention.bucket_lookup import BucketIndex, add_at
from vitpos.attention.triton import score_grads

B, H, N, K = 2, 3, 7, 5


def scattered(ds: torch.Tensor, ids: torch.Tensor, shape: tuple[int, ...], columns: bool) -> torch.Tensor:
    """The gradient of scores of ``shape`` read at ``ids`` per query (rows) or per key (columns), by scatter-add."""
    index = BucketIndex(ids, K)
    flat = index.columns(slice(None)) if columns else index.rows(slice(None), per_query=shape[-2] != 1)
    target = torch.zeros(*shape[:-2], shape[-2], K, dtype=torch.float64)
    return add_at(target, flat, ds.double().sum_to_size(*shape[:-2], N, N))


@pytest.mark.parametrize("maps", [1, 2])
@pytest.mark.parametrize("shape", [(B, H, N, K), (1, H, 1, K), (1, 1, 1, K), (B, 1, N, K)])
def test_row_gradients_equal_the_scatter(shape, maps):
    ids = torch.randint(0, K, (maps, N, N)).squeeze(0)
    ds = torch.randn(B, H, N, N)
    got = score_grads.row_grad(ds, ids, K, torch.Size(shape))
    assert got.shape == shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), scattered(ds, ids, shape, columns=False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("maps", [1, 2])
@pytest.mark.parametrize("shape", [(B, H, N, K), (1, H, N, K)])
def test_column_gradients_equal_the_scatter(shape, maps):
    ids = torch.randint(0, K, (maps, N, N)).squeeze(0)
    ds = torch.randn(B, H, N, N)
    got = score_grads.col_grad(ds, ids, K, torch.Size(shape))
    assert got.shape == shape
    torch.testing.assert_close(got.double(), scattered(ds, ids, shape, columns=True), rtol=1e-5, atol=1e-5)


def test_one_hot_counts_both_maps_and_is_built_once_per_ids():
    ids = torch.tensor([[[0, 1], [2, 2]], [[0, 0], [1, 2]]])
    hot = score_grads.one_hot(ids, 3, torch.bfloat16)
    assert hot.dtype == torch.bfloat16
    assert hot.float().tolist() == [[[2, 0, 0], [1, 1, 0]], [[0, 1, 1], [0, 0, 2]]]
    assert score_grads.one_hot(ids, 3, torch.bfloat16) is hot


def test_bf16_inputs_store_bf16_score_gradients_and_others_float32():
    assert score_grads.score_grad_dtype(torch.bfloat16) == torch.bfloat16
    assert score_grads.score_grad_dtype(torch.float16) == torch.float32
    assert score_grads.score_grad_dtype(torch.float32) == torch.float32
