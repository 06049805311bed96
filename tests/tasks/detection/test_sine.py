"""The ``sine`` absolute encoding is DETR's PositionEmbeddingSine(normalize=True), written out as DETR's code
does it."""

import math

import pytest
import torch

import vitpos
from vitpos.encodings.sine import detr_sine


def detr_reference(h: int, w: int, num_pos_feats: int, temperature: float = 10000.0) -> torch.Tensor:
    """DETR's models/position_encoding.py, for an image without padding; (H*W, 2 * num_pos_feats)."""
    not_mask = torch.ones(1, h, w, dtype=torch.float64)
    y_embed, x_embed = not_mask.cumsum(1), not_mask.cumsum(2)
    eps, scale = 1e-6, 2 * math.pi
    y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
    x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
    dim_t = torch.arange(num_pos_feats, dtype=torch.float64)
    dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
    pos_x, pos_y = x_embed[:, :, :, None] / dim_t, y_embed[:, :, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3)[0].reshape(h * w, -1)


@pytest.mark.parametrize("grid", [(8, 8), (5, 11), (25, 34)])
@pytest.mark.parametrize("dim", [64, 256])
def test_equals_detrs_code(grid, dim):
    torch.testing.assert_close(detr_sine(grid, dim), detr_reference(*grid, dim // 2), atol=1e-5, rtol=0)


def test_the_slot_gives_it_at_any_grid():
    model = vitpos.create_model("detr_tiny_sine")
    absolute = model.stages[0].absolute
    for grid in [(8, 8), (6, 12)]:
        torch.testing.assert_close(absolute(grid)[0], detr_sine(grid, 64).float())


def test_width_must_divide_by_four():
    with pytest.raises(ValueError, match="divisible by 4"):
        detr_sine((4, 4), 66)
