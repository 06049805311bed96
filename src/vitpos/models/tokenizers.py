"""CCT's convolutional tokenizer (Hassani et al. 2021, §3): convolution, ReLU and max-pool, repeated."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config.compact import POOL_KERNEL, POOL_PADDING, POOL_STRIDE
from ..grid import Grid
from .layers import check_images

__all__ = ["ConvTokenizer"]


class ConvTokenizer(nn.Module):
    """``layers`` x (k x k convolution without bias, ReLU, 3 x 3 max-pool of stride 2) -> (B, H*W, D), grid.

    The convolutions are initialised He-normal, as the authors do; intermediate layers have
    ``channels`` channels, the last ``embed_dim``.
    """

    def __init__(
        self, in_chans: int, embed_dim: int, layers: int, kernel: int, stride: int, padding: int, channels: int
    ) -> None:
        super().__init__()
        self.in_chans = in_chans
        widths = [in_chans] + [channels] * (layers - 1) + [embed_dim]
        convs = [nn.Conv2d(widths[i], widths[i + 1], kernel, stride, padding, bias=False) for i in range(layers)]
        for conv in convs:
            nn.init.kaiming_normal_(conv.weight)
        self.convs = nn.ModuleList(convs)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        self.check_input(x)
        for conv in self.convs:
            x = F.max_pool2d(F.relu(conv(x)), POOL_KERNEL, POOL_STRIDE, POOL_PADDING)
        return x.flatten(2).transpose(1, 2), (x.shape[-2], x.shape[-1])

    def check_input(self, x: torch.Tensor) -> None:
        """Raise :class:`~vitpos.errors.VitposError` for inputs the tokenizer cannot take."""
        first = self.convs[0]
        assert isinstance(first, nn.Conv2d)
        check_images(x, self.in_chans, first.weight, 0, "pixel")
