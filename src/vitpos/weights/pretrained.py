"""The authors' released weights of each preset: ``create_model(NAME, pretrained=True)``, and a
checkpoint named on the command line by a preset or a URL (:func:`resolve_checkpoint`).

Every URL is copied from the README of the repository that publishes it (``source``); a preset
whose authors publish no file there has none. No publisher here states a full SHA-256: the
DeiT files carry a hash prefix in their names (checked, torch.hub's convention), and every file
passes the strict key and shape check when it is loaded. RoPE-ViT's files all end in
``pytorch_model.bin`` (their README links each model's Hugging Face page, and their
``models/vit_rope.py`` reads that file from it); each is cached under its model's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError
from ..models.factory import list_models
from .download import download

__all__ = ["RELEASES", "Release", "fetch_pretrained", "names_release", "pretrained_models", "resolve_checkpoint"]

DEIT = "facebookresearch/deit README_deit.md"
IRPE = "microsoft/Cream iRPE/README.md"
SWIN = "microsoft/Swin-Transformer README.md"
SWIN_STORAGE = "https://github.com/SwinTransformer/storage/releases/download/"
PVT = "whai362/PVT classification/README.md"
IRPE_ZOO = "https://github.com/wkcn/iRPE-model-zoo/releases/download/1.0/"
URL_SCHEMES = ("http://", "https://")
ROPE_VIT = "naver-ai/rope-vit README.md (Hugging Face hub links) and models/vit_rope.py"
ROPE_VIT_NAMES = (
    *(
        f"rope_{kind}_deit_{size}_patch16_LS"
        for kind in ("axial", "mixed", "axial_ape", "mixed_ape")
        for size in ("small", "base", "large")
    ),
    *(f"swin_rope_{kind}_{size}_patch4_window7_224" for kind in ("axial", "mixed") for size in ("tiny", "small")),
)


@dataclass(frozen=True)
class Release:
    """Where a preset's released weights are published."""

    url: str
    source: str
    """The README the URL was copied from."""
    sha256: str | None = None
    """The full SHA-256, where the publisher states one."""
    filename: str | None = None
    """The name it is cached under, where the URL's own name is shared by several files."""


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
    **{
        name: Release(
            f"https://huggingface.co/naver-ai/{name}/resolve/main/pytorch_model.bin", ROPE_VIT, filename=f"{name}.bin"
        )
        for name in ROPE_VIT_NAMES
    },
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
            "(`vitpos models --pretrained`), or give a checkpoint file"
        )
    return download(release.url, release.sha256, release.filename)


def names_release(source: str | Path) -> bool:
    """Whether ``source`` names a preset with released weights rather than a path (a path that exists wins)."""
    return isinstance(source, str) and source in RELEASES and not Path(source).exists()


def resolve_checkpoint(source: str | Path) -> Path:
    """The file or folder a checkpoint names: a path as it is; a URL, or a preset with released
    weights, as its file in the weights cache (downloaded and verified first, or checked there)."""
    if isinstance(source, Path) or Path(source).exists():
        return Path(source)
    if source.startswith(URL_SCHEMES):
        return download(source)
    if source in list_models():  # a preset without released weights: fetch_pretrained says so
        return fetch_pretrained(source)
    return Path(source)
