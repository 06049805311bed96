"""The Host protocol: what every host (ViT, PVT, Swin, ...) offers the tools that use it.

The engine, the analysis commands, the study and export rely only on these names. A host is a
pyramid of stages (the plain ViT is a pyramid of one stage with no downsampling after it):
every stage holds the four position slots at its own width and grid (:class:`~.stage.Stage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

import torch
from torch import nn

from ..errors import VitposError
from ..grid import Grid

if TYPE_CHECKING:
    from ..config import HostConfig

__all__ = ["Host", "is_host", "as_host"]


@runtime_checkable
class Host(Protocol):
    """A vision transformer with position slots per stage, as the tools see it.

    ``cfg`` is the host's config (:class:`~vitpos.config.HostConfig`): it knows the stages'
    number, widths, grids and prefix tokens without building the model. ``stages`` holds one
    :class:`~.stage.Stage` per stage (``.index``, ``.absolute``, ``.join``, ``.conditional``,
    ``.blocks``, ``.num_prefix_tokens``, ``.position_encoding(grid)``); every block's ``attn``
    returns its softmax weights with ``return_weights=True``.
    """

    cfg: HostConfig
    num_classes: int
    num_features: int
    """Width of the last stage's tokens (what the head reads)."""
    num_prefix_tokens: int
    """Prefix tokens (class and register tokens) of the last stage."""
    stages: nn.ModuleList

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        """The token grid of every stage for an image of size ``image_hw``; raises if it does not fit."""
        ...

    def forward_features(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Images -> one map (B, C_s, H_s, W_s) per stage; the last one after the final norm.

        ``padding_mask`` (B, H, W), True at padded pixels: a padded batch (:mod:`vitpos.padding`);
        each image's valid cells get what the image alone gets, padded cells are zero."""
        ...

    def forward_tokens(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Images -> the last stage's normalised tokens (B, P + H*W, C), prefix tokens first."""
        ...

    def forward_head(self, tokens: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Pool the last stage's tokens and classify (or return the pooled features)."""
        ...

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> logits: ``forward_head(forward_tokens(x))``."""
        ...

    def no_weight_decay(self) -> set[str]:
        """Parameter names exempt from weight decay: prefix tokens and position parameters."""
        ...

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the four position slots of every stage, by its name in the model."""
        ...


HOST_MEMBERS = (
    "cfg", "num_classes", "num_features", "num_prefix_tokens", "stages", "stage_grids", "forward_features",
    "forward_tokens", "forward_head", "forward", "no_weight_decay", "position_parameters",
)  # fmt: skip
"""The names :class:`Host` declares."""


def is_host(model: object) -> TypeGuard[Host]:
    """Whether ``model`` offers every name of :class:`Host`.

    Use this rather than ``isinstance(model, Host)``: from Python 3.12 on, ``isinstance`` with a
    protocol looks attributes up statically and misses ``stages``, a submodule that
    :class:`torch.nn.Module` keeps in its own registry.
    """
    return all(hasattr(model, name) for name in HOST_MEMBERS)


def as_host(model: object) -> Host:
    """``model`` seen through :class:`Host`; a :class:`~vitpos.errors.VitposError` for any other object."""
    if not is_host(model):
        missing = ", ".join(name for name in HOST_MEMBERS if not hasattr(model, name))
        raise VitposError(
            f"{type(model).__name__} is not a host (ViT, PVT, Swin, DETR) with the stages these tools read "
            f"(it has no {missing}); pass a model from vitpos.create_model (checkpoint=... for trained weights) "
            "(of a segmentation model, its .backbone)"
        )
    return model
