"""The hosts a study trains: the thesis's one-block ViT, small pyramids whose last stage has its grid, a CCT.

A family names its host (``host=pvt``); a family without one trains the study's model. Each
pyramid has two stages of one block each: stage 0 on a grid twice as fine as the ViT's (patch
2), stage 1 on the ViT's grid (patch 4 equivalent: 6x6 at the default 24 px, 8x8 at ``--full``'s
32 px), widths 32 and 64 (the ViT's 64), 2 and 4 heads (the ViT's 4), MLP ratio 4. So a
pyramid family sees the same tasks at the same last-stage resolution; position slots apply to
both stages, and the probes read the last stage's table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import CompactConfig, HostConfig, PVTConfig, PyramidConfig, SwinConfig
from ..models.factory import get_config

__all__ = ["STUDY_HOSTS", "study_model", "study_host"]


def study_model(img_size: int | tuple[int, int] = 24) -> HostConfig:
    """The ``thesis_vit`` preset (the thesis's one-block ViT with a class token) at ``img_size``.

    The default study uses 24x24 images, a 6x6 grid, so that every family has the optimiser
    steps it needs within minutes on a CPU; ``--full`` uses the preset's 32x32 (8x8 grid).
    """
    return get_config("thesis_vit", img_size=img_size)


def _pyramid(host: type[PyramidConfig], img_size: int | tuple[int, int], *, head: str, **fields: Any) -> PyramidConfig:
    return host(
        img_size=img_size,
        patch_size=2,
        embed_dims=(32, 64),
        depths=(1, 1),
        num_heads=(2, 4),
        mlp_ratios=(4.0, 4.0),
        num_classes=2,
        head=head,
        **fields,
    )


STUDY_HOSTS: dict[str, Callable[[int | tuple[int, int]], HostConfig]] = {
    "vit": study_model,
    # PVT: global attention at both stages (no spatial reduction on grids this small), a class token
    # on the last stage as the ViT's
    "pvt": lambda img_size: _pyramid(PVTConfig, img_size, head="cls"),
    # Swin: 3x3 windows (4x4 windows of stage 0, 2x2 of stage 1 at 24 px), its relative bias and no
    # table, average pooling (window attention has no class token)
    "swin": lambda img_size: _pyramid(SwinConfig, img_size, window_size=3, head="gap").replace(
        absolute="none", relative="swin"
    ),
    # CCT: two blocks of 3x3 convolution, ReLU and max-pool put the tokens on the ViT's grid (24 px ->
    # 6x6); one of the authors' layers at the ViT's width and heads, sequence pooling, a learned table
    "cct": lambda img_size: CompactConfig(
        img_size=img_size,
        tokenizer="conv",
        patch_size=4,  # unused by the convolutional stem; the synthetic tasks' squares are the ViT's patch
        conv_layers=2,
        conv_channels=32,
        embed_dim=64,
        depth=1,
        num_heads=4,
        mlp_ratio=4.0,
        num_classes=2,
        head="seq",
    ),
}
"""Host name -> its study config at an image size."""


def study_host(name: str, img_size: int | tuple[int, int] = 24) -> HostConfig:
    """The study config of host ``name`` at ``img_size``; raises for an unknown name."""
    if name not in STUDY_HOSTS:
        raise ValueError(f"unknown study host {name!r}; study hosts: {', '.join(STUDY_HOSTS)}")
    return STUDY_HOSTS[name](img_size)
