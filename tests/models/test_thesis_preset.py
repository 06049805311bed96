"""The thesis's one-block ViT for the red-green tasks."""

import torch

import vitpos


def test_thesis_vit_is_one_block_on_32px_images():
    cfg = vitpos.get_config("thesis_vit")
    assert (cfg.depth, cfg.img_size, cfg.patch_size, cfg.grid, cfg.head) == (1, 32, 4, (8, 8), "cls")
    d, tokens, hidden = cfg.embed_dim, 64, int(cfg.embed_dim * cfg.mlp_ratio)
    expected = (
        (3 * 4 * 4 + 1) * d  # patch embedding
        + d
        + tokens * d
        + d  # class token, learned table, class-token position
        + 2 * d
        + (d + 1) * 3 * d
        + (d + 1) * d  # norm1, qkv, proj
        + 2 * d
        + (d + 1) * hidden
        + (hidden + 1) * d  # norm2, MLP
        + 2 * d
        + (d + 1) * 2  # final norm, two-class head
    )
    model = vitpos.create_model("thesis_vit")
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 2)
    assert model(torch.randn(2, 3, 48, 64)).shape == (2, 2)
