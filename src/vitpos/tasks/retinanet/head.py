"""RetinaNet's heads (Lin et al. 2017, §4, Fig. 3): a classification and a box subnet shared by every level.

Each subnet is four 3x3 convolutions of the FPN's width with ReLU, then a 3x3 convolution to
A x K class logits (sigmoid per class) or A x 4 box deltas per cell. Weights are drawn from
N(0, 0.01) with zero biases, except the last class bias, -log((1 - pi) / pi) with pi = 0.01, so
every anchor starts as background with confidence 0.99 (the paper's prior, §4.1).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["RetinaNetHead", "PRIOR_PROBABILITY"]

PRIOR_PROBABILITY = 0.01
"""The foreground probability every anchor starts with (the paper's pi)."""


def _conv(in_dim: int, out: int) -> nn.Conv2d:
    """A 3x3 convolution with N(0, 0.01) weights and a zero bias."""
    conv = nn.Conv2d(in_dim, out, 3, padding=1)
    nn.init.normal_(conv.weight, std=0.01)
    assert conv.bias is not None  # nn.Conv2d has a bias unless bias=False
    nn.init.zeros_(conv.bias)
    return conv


def _subnet(dim: int, convs: int, out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(convs):
        layers += [_conv(dim, dim), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, _conv(dim, out))


def _flatten(x: torch.Tensor, per_anchor: int) -> torch.Tensor:
    """(B, A * k, H, W) -> (B, H * W * A, k): cell-major, then anchor, as the anchors are laid out."""
    b, _, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, h * w * (x.shape[1] // per_anchor), per_anchor)


class RetinaNetHead(nn.Module):
    """FPN levels (B, dim, H_l, W_l) -> class logits (B, N, K) and box deltas (B, N, 4) over all N anchors."""

    def __init__(self, dim: int, num_anchors: int, num_classes: int, convs: int = 4) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.cls_subnet = _subnet(dim, convs, num_anchors * num_classes)
        self.box_subnet = _subnet(dim, convs, num_anchors * 4)
        last = self.cls_subnet[-1]
        assert isinstance(last, nn.Conv2d) and last.bias is not None  # _subnet ends in a biased convolution
        nn.init.constant_(last.bias, -math.log((1 - PRIOR_PROBABILITY) / PRIOR_PROBABILITY))

    def forward(self, levels: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        logits = torch.cat([_flatten(self.cls_subnet(x), self.num_classes) for x in levels], dim=1)
        deltas = torch.cat([_flatten(self.box_subnet(x), 4) for x in levels], dim=1)
        return logits, deltas
