"""RetinaNet's feature pyramid P3-P7 (Lin et al., ICCV 2017, §4) on a pyramid host's last three stages.

P3-P5 are FPN's levels (1x1 laterals, top-down nearest upsampling and addition, 3x3 outputs) on
C3-C5, the maps of strides 8, 16 and 32 (PVT's stages 2-4, as PVT's RetinaNet: mmdet's FPN with
``start_level=1``). P6 is a 3x3 stride-2 convolution on C5 and P7 one on ReLU(P6), the paper's
choice. PVT's released configs (mmdet's ``add_extra_convs='on_input'``) also take P6 from C5 but
apply no ReLU before P7: ``relu_before_p7=False``. ``p6_from='p5'`` takes P6 from P5 instead
(mmdet's ``'on_output'``, FCOS's choice).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..segmentation.fpn import FeaturePyramid

__all__ = ["RetinaFeaturePyramid", "P6_SOURCES"]

P6_SOURCES = ("c5", "p5")
"""What P6 is computed from: the last backbone map (the paper, PVT) or FPN's P5."""


def _extra_conv(in_dim: int, dim: int) -> nn.Conv2d:
    conv = nn.Conv2d(in_dim, dim, 3, stride=2, padding=1)
    nn.init.xavier_uniform_(conv.weight)  # as mmdet's FPN
    assert conv.bias is not None  # nn.Conv2d has a bias unless bias=False
    nn.init.zeros_(conv.bias)
    return conv


class RetinaFeaturePyramid(nn.Module):
    """C3-C5 (B, C_s, H_s, W_s) -> P3-P7, each (B, dim, H_l, W_l) with H_l = ceil(H / 2**l)."""

    def __init__(
        self, in_dims: tuple[int, int, int], dim: int, p6_from: str = "c5", relu_before_p7: bool = True
    ) -> None:
        super().__init__()
        if p6_from not in P6_SOURCES:
            raise ValueError(f"p6_from={p6_from!r}: choose one of {', '.join(P6_SOURCES)}")
        self.fpn = FeaturePyramid(in_dims, dim)
        self.p6_from, self.relu_before_p7 = p6_from, relu_before_p7
        self.p6 = _extra_conv(in_dims[-1] if p6_from == "c5" else dim, dim)
        self.p7 = _extra_conv(dim, dim)

    def forward(self, maps: list[torch.Tensor]) -> list[torch.Tensor]:
        levels = self.fpn(maps)
        p6 = self.p6(maps[-1] if self.p6_from == "c5" else levels[-1])
        p7 = self.p7(F.relu(p6) if self.relu_before_p7 else p6)
        return [*levels, p6, p7]
