"""The FPN neck (Lin et al., CVPR 2017) and the Semantic FPN head (Kirillov et al., CVPR 2019).

The neck maps the S per-stage maps of a pyramid (strides 4, 8, 16, 32 for PVT and Swin) to S
maps of ``fpn_dim`` channels: a 1x1 lateral convolution per stage, a top-down pathway that adds
each coarser map upsampled (nearest) to the finer one, and a 3x3 output convolution per level.
The head upsamples every level to the finest stride by stages of 3x3 convolution, GroupNorm,
ReLU and 2x bilinear upsampling (one stage for the finest level, one per halving for the
others), sums them, classifies each pixel with a 1x1 convolution and resizes the logits
bilinearly to the input size (as mmseg's FPNHead and EncoderDecoder do).

``padding`` is how every 3x3 convolution of the neck and the head pads its input: 'zeros' (the
papers' and mmseg's), or 'replicate' / 'circular', which give a map's border no constant frame a
convolution could read position from (to test whether the FPN itself tells where the border is).
"""

from __future__ import annotations

import typing
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FeaturePyramid", "SemanticFPNHead", "CONV_PADDINGS"]

ConvPadding = Literal["zeros", "replicate", "circular"]
CONV_PADDINGS: tuple[ConvPadding, ...] = typing.get_args(ConvPadding)
"""How the 3x3 convolutions pad (``nn.Conv2d``'s ``padding_mode``); reflection needs maps wider than 1 cell."""


def _conv3x3(in_dim: int, dim: int, padding: str, bias: bool = True) -> nn.Conv2d:
    """A 3x3 convolution keeping the size, padded by ``padding`` (one of :data:`CONV_PADDINGS`)."""
    for mode in CONV_PADDINGS:
        if padding == mode:
            return nn.Conv2d(in_dim, dim, 3, padding=1, bias=bias, padding_mode=mode)
    raise ValueError(f"padding={padding!r}: choose one of {', '.join(CONV_PADDINGS)}")


class FeaturePyramid(nn.Module):
    """FPN: lateral 1x1 convolutions, top-down nearest upsampling and addition, 3x3 outputs."""

    def __init__(self, in_dims: tuple[int, ...], dim: int, padding: str = "zeros") -> None:
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(c, dim, 1) for c in in_dims)
        self.output = nn.ModuleList(_conv3x3(dim, dim, padding) for _ in in_dims)
        for conv in [*self.lateral, *self.output]:  # Xavier-uniform, as mmdet's FPN
            nn.init.xavier_uniform_(conv.weight)
            nn.init.zeros_(conv.bias)

    def forward(self, maps: list[torch.Tensor]) -> list[torch.Tensor]:
        if len(maps) != len(self.lateral):
            raise ValueError(f"the FPN was built for {len(self.lateral)} stages, got {len(maps)} maps")
        laterals = [conv(m) for conv, m in zip(self.lateral, maps, strict=True)]
        for i in range(len(laterals) - 1, 0, -1):
            coarser = F.interpolate(laterals[i], size=laterals[i - 1].shape[-2:], mode="nearest")
            laterals[i - 1] = laterals[i - 1] + coarser
        return [conv(m) for conv, m in zip(self.output, laterals, strict=True)]


def _upsampling_stage(in_dim: int, dim: int, groups: int, upsample: bool, padding: str) -> nn.Sequential:
    conv = _conv3x3(in_dim, dim, padding, bias=False)
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
    layers: list[nn.Module] = [conv, nn.GroupNorm(groups, dim), nn.ReLU(inplace=True)]
    if upsample:
        layers.append(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False))
    return nn.Sequential(*layers)


def _scale_head(level: int, in_dim: int, dim: int, groups: int, padding: str) -> nn.Sequential:
    """Level ``level`` (stride 2**level times the finest) to the finest stride: max(1, level) stages."""
    stages = max(1, level)
    return nn.Sequential(
        *(_upsampling_stage(dim if k else in_dim, dim, groups, level > 0, padding) for k in range(stages))
    )


class SemanticFPNHead(nn.Module):
    """Per-pixel logits (B, K, H, W) at the input size from the FPN levels (finest first)."""

    def __init__(
        self,
        levels: int,
        in_dim: int,
        dim: int,
        num_classes: int,
        groups: int = 32,
        dropout: float = 0.1,
        padding: str = "zeros",
    ) -> None:
        super().__init__()
        self.scale_heads = nn.ModuleList(_scale_head(level, in_dim, dim, groups, padding) for level in range(levels))
        self.dropout = nn.Dropout2d(dropout)
        self.classifier = nn.Conv2d(dim, num_classes, 1)
        nn.init.normal_(self.classifier.weight, std=0.01)
        assert self.classifier.bias is not None  # nn.Conv2d has a bias unless bias=False
        nn.init.zeros_(self.classifier.bias)

    def forward(self, levels: list[torch.Tensor], image_hw: tuple[int, int]) -> torch.Tensor:
        out = self.scale_heads[0](levels[0])
        for head, level in zip(self.scale_heads[1:], levels[1:], strict=True):
            up = head(level)
            if up.shape[-2:] != out.shape[-2:]:
                up = F.interpolate(up, size=out.shape[-2:], mode="bilinear", align_corners=False)
            out = out + up
        logits = self.classifier(self.dropout(out))
        return F.interpolate(logits, size=tuple(image_hw), mode="bilinear", align_corners=False)
