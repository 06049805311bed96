"""CeiT's layers (Yuan et al., ICCV 2021, §3): the I2T stem, the LeFF feed-forward, layer-wise class-token attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config.ceit import POOL, STEM_KERNEL, STEM_STRIDE
from ..grid import Grid, map_to_tokens, tokens_to_map
from .layers import Mlp, check_images, init_linear

__all__ = ["ImageToTokens", "LocallyEnhancedFeedForward", "LayerClassAttention"]


class ImageToTokens(nn.Module):
    """I2T: 7 x 7 convolution (stride 2, no bias), BatchNorm, 3 x 3 max-pool (stride 2), k x k patches -> tokens."""

    def __init__(self, in_chans: int, channels: int, patch_size: int, embed_dim: int) -> None:
        super().__init__()
        self.in_chans = in_chans
        self.conv = nn.Conv2d(in_chans, channels, STEM_KERNEL, STEM_STRIDE, STEM_KERNEL // 2, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.proj = nn.Conv2d(channels, embed_dim, patch_size, patch_size)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        self.check_input(x)
        x = self.proj(F.max_pool2d(self.bn(self.conv(x)), *POOL))
        return x.flatten(2).transpose(1, 2), (x.shape[-2], x.shape[-1])

    def check_input(self, x: torch.Tensor) -> None:
        """Raise :class:`~vitpos.errors.VitposError` for inputs the stem cannot take."""
        check_images(x, self.in_chans, self.proj.weight, 1, "pixel")


class LocallyEnhancedFeedForward(nn.Module):
    """LeFF on the patch tokens: pointwise up, BN, GELU, depthwise k x k, BN, GELU, pointwise down, BN.

    The prefix tokens pass through unchanged (the block adds them to its residual, as the
    authors' layer does); the patch tokens are folded into their (H, W) map for the convolutions.
    """

    def __init__(self, dim: int, hidden: int, kernel: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(dim, hidden, 1)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.conv2 = nn.Conv2d(hidden, hidden, kernel, padding=(kernel - 1) // 2, groups=hidden)
        self.bn2 = nn.BatchNorm2d(hidden)
        self.conv3 = nn.Conv2d(hidden, dim, 1)
        self.bn3 = nn.BatchNorm2d(dim)

    def forward(self, x: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # B, P + H*W, C
        prefix, tokens = x[:, :num_prefix_tokens], x[:, num_prefix_tokens:]
        y = F.gelu(self.bn1(self.conv1(tokens_to_map(tokens, grid))))
        y = self.bn3(self.conv3(F.gelu(self.bn2(self.conv2(y)))))
        return torch.cat([prefix, map_to_tokens(y)], dim=1)


class LayerClassAttention(nn.Module):
    """LCA: the last of the blocks' class tokens (B, L, C) attends over all of them, then an MLP -> (B, 1, C)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool, norm_eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.qkv = init_linear(nn.Linear(dim, 3 * dim, bias=qkv_bias))
        self.proj = init_linear(nn.Linear(dim, dim))
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, L, C -> B, 1, C
        b, n, c = x.shape
        h = self.norm1(x)
        w, bias = self.qkv.weight, self.qkv.bias
        # the query as a (B, C) row, the attention written out: the batch stays symbolic under export
        q = F.linear(h[:, -1], w[:c], None if bias is None else bias[:c]).reshape(b, self.num_heads, 1, -1)
        kv = F.linear(h, w[c:], None if bias is None else bias[c:])
        k, v = kv.reshape(b, n, 2, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)  # B, heads, 1, L
        out = self.proj((weights @ v).reshape(b, c))
        x = (x[:, -1] + out)[:, None]
        return x + self.mlp(self.norm2(x))
