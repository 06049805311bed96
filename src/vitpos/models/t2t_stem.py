"""T2T-ViT's tokens-to-token stem (Yuan et al., ICCV 2021, §3.1): soft splits and re-structuring layers.

Each soft split unfolds overlapping k x k patches into tokens (B, N, C k^2); between the splits
a one-head layer narrows the tokens to ``token_dim`` and they are folded back into a map
(re-structurisation). The layer is a transformer (:class:`TokenTransformer`) or, in T2T-ViT-7 to
24, a performer (:class:`TokenPerformer`: attention approximated by positive orthogonal random
features). Both take the values as the residual, as the authors' layers do, since the input is
wider than the output.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config.t2t import SOFT_SPLITS
from ..grid import Grid, tokens_to_map
from .layers import Mlp, check_images, init_linear

__all__ = ["TokenTransformer", "TokenPerformer", "TokensToToken"]


class _NarrowingAttention(nn.Module):
    """One-head attention from width ``dim`` to ``out_dim``, logits scaled by dim^-0.5, values as residual."""

    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.scale = dim**-0.5
        self.qkv = init_linear(nn.Linear(dim, 3 * out_dim, bias=False))
        self.proj = init_linear(nn.Linear(out_dim, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, N, dim -> B, N, out_dim
        q, k, v = self.qkv(x).split(self.out_dim, dim=-1)
        out = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], scale=self.scale)[:, 0]
        return v + self.proj(out)


class TokenTransformer(nn.Module):
    """The stem's transformer layer: narrowing attention, then a residual MLP of ratio 1."""

    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = _NarrowingAttention(dim, out_dim)
        self.norm2 = nn.LayerNorm(out_dim)
        self.mlp = Mlp(out_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TokenPerformer(nn.Module):
    """The stem's performer layer: linear attention through m = out_dim / 2 positive random features.

    softmax(q k^T) is approximated by phi(q) phi(k)^T with phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)
    and W (m, out_dim) orthogonal rows of norm sqrt(m), drawn once and kept (a buffer). The
    features are computed in float32 or wider, outside autocast (an exponential of them overflows
    in half precision).
    """

    def __init__(self, dim: int, out_dim: int, kernel_ratio: float = 0.5) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.norm1 = nn.LayerNorm(dim)
        self.kqv = init_linear(nn.Linear(dim, 3 * out_dim))
        self.proj = init_linear(nn.Linear(out_dim, out_dim))
        self.norm2 = nn.LayerNorm(out_dim)
        self.mlp = nn.Sequential(
            init_linear(nn.Linear(out_dim, out_dim)), nn.GELU(), init_linear(nn.Linear(out_dim, out_dim))
        )
        m = int(out_dim * kernel_ratio)
        self.features: torch.Tensor
        features = torch.empty(m, out_dim)
        if features.device.type != "meta":  # sizes only there; arithmetic on the meta device loads much of torch
            nn.init.orthogonal_(features).mul_(math.sqrt(m))
        self.register_buffer("features", features)

    def _positive_features(self, x: torch.Tensor) -> torch.Tensor:  # B, N, d -> B, N, m
        m = self.features.shape[0]
        return torch.exp(x @ self.features.t() - x.square().sum(-1, keepdim=True) / 2) / math.sqrt(m)

    def attend(self, x: torch.Tensor) -> torch.Tensor:  # B, N, dim -> B, N, out_dim
        """The linear attention with the values as residual."""
        k, q, v = self.kqv(x).split(self.out_dim, dim=-1)
        with torch.autocast(x.device.type, enabled=False):
            dtype = torch.promote_types(v.dtype, torch.float32)
            k, q, v32 = k.to(dtype), q.to(dtype), v.to(dtype)
            kp, qp = self._positive_features(k), self._positive_features(q)
            normaliser = qp @ kp.sum(dim=1)[..., None]  # B, N, 1
            out = (qp @ (kp.transpose(1, 2) @ v32)) / (normaliser + 1e-8)
        return v + self.proj(out.to(v.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attend(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TokensToToken(nn.Module):
    """Image -> three soft splits, a layer and a re-structuring after each of the first two, a projection.

    Returns the tokens (B, H*W, D) and their grid.
    """

    def __init__(self, in_chans: int, embed_dim: int, token_dim: int, layer: str) -> None:
        super().__init__()
        self.in_chans = in_chans
        make = TokenPerformer if layer == "performer" else TokenTransformer
        (k0, _, _), (k1, _, _), (k2, _, _) = SOFT_SPLITS
        self.attention1 = make(in_chans * k0 * k0, token_dim)
        self.attention2 = make(token_dim * k1 * k1, token_dim)
        self.project = init_linear(nn.Linear(token_dim * k2 * k2, embed_dim))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        self.check_input(x)
        layers = (self.attention1, self.attention2)
        for i, (kernel, stride, padding) in enumerate(SOFT_SPLITS):
            h, w = x.shape[-2:]
            grid = ((h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1)
            tokens = F.unfold(x, kernel, padding=padding, stride=stride).transpose(1, 2)  # B, N, C k^2
            if i < len(layers):
                x = tokens_to_map(layers[i](tokens), grid)
        return self.project(tokens), grid

    def check_input(self, x: torch.Tensor) -> None:
        """Raise :class:`~vitpos.errors.VitposError` for inputs the stem cannot take."""
        check_images(x, self.in_chans, self.project.weight, 3, "pixel")
