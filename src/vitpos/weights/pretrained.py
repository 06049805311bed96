"""The authors' released weights of each preset: ``create_model(NAME, pretrained=True)``.

Every URL is copied from the README of the repository that publishes it (``source``); a preset
whose authors publish no file there has none. No publisher here states a full SHA-256: the
DeiT files carry a hash prefix in their names (checked, torch.hub's convention), and every file
passes the strict key and shape check when it is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError
from .download import download

__all__ = ["RELEASES", "Release", "fetch_pretrained", "pretrained_models"]

DEIT = "facebookresearch/deit README_deit.md"
IRPE = "microsoft/Cream iRPE/README.md"
SWIN = "microsoft/Swin-Transformer README.md"
SWIN_STORAGE = "https://github.com/SwinTransformer/storage/releases/download/"
PVT = "whai362/PVT classification/README.md"
IRPE_ZOO = "https://github.com/wkcn/iRPE-model-zoo/releases/download/1.0/"


@dataclass(frozen=True)
class Release:
    """Where a preset's released weights are published."""

    url: str
    source: str
    """The README the URL was copied from."""
    sha256: str | None = None
    """The full SHA-256, where the publisher states one."""


RELEASES: dict[str, Release] = {
    "deit_tiny_patch16_224": Release("https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth", DEIT),
    "deit_small_patch16_224": Release("https://dl.fbaipublicfiles.com/deit/deit_small_patch16_224-cd65a155.pth", DEIT),
    "deit_base_patch16_224": Release("https://dl.fbaipublicfiles.com/deit/deit_base_patch16_224-b5f2ef4d.pth", DEIT),
    "deit_tiny_distilled_patch16_224": Release(
        "https://dl.fbaipublicfiles.com/deit/deit_tiny_distilled_patch16_224-b40b3cf7.pth", DEIT
    ),
    "deit_small_distilled_patch16_224": Release(
        "https://dl.fbaipublicfiles.com/deit/deit_small_distilled_patch16_224-649709d9.pth", DEIT
    ),
    **{
        name: Release(f"{IRPE_ZOO}{name}.pth", IRPE)
        for name in (
            "deit_tiny_patch16_224_ctx_product_50_shared_k",
            "deit_small_patch16_224_ctx_product_50_shared_k",
            "deit_small_patch16_224_ctx_product_50_shared_qk",
            "deit_small_patch16_224_ctx_product_50_shared_qkv",
            "deit_base_patch16_224_ctx_product_50_shared_k",
            "deit_base_patch16_224_ctx_product_50_shared_qkv",
        )
    },
    "swin_tiny": Release(
        "https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth", SWIN
    ),
    "swin_small": Release(
        "https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth", SWIN
    ),
    **{
        f"swinv2_{size}_window{window}_256": Release(
            f"{SWIN_STORAGE}v2.0.0/swinv2_{size}_patch4_window{window}_256.pth", SWIN
        )
        for size in ("tiny", "small", "base")
        for window in (8, 16)
    },
    "pvt_tiny": Release("https://github.com/whai362/PVT/releases/download/v2/pvt_tiny.pth", PVT),
    "pvt_small": Release("https://github.com/whai362/PVT/releases/download/v2/pvt_small.pth", PVT),
}
"""Presets with released weights, by name."""


def pretrained_models() -> list[str]:
    """The presets that have released weights."""
    return sorted(RELEASES)


def fetch_pretrained(name: str) -> Path:
    """The released weights file of preset ``name``, from the cache or downloaded and verified."""
    release = RELEASES.get(name)
    if release is None:
        raise CheckpointError(
            f"preset {name!r} has no released weights; presets with weights: {', '.join(pretrained_models())} "
            "(`vitpos models --pretrained`), or pass checkpoint=PATH"
        )
    return download(release.url, release.sha256)
