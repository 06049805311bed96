"""Dense task models on a pyramid host: their config (the host's fields plus which host it is) and base.

A Semantic FPN segmenter and a RetinaNet detector both hold a PVT or Swin host (built from
:attr:`PyramidHeadConfig.backbone_config`: the same fields with ``arch=backbone`` and no
classifier) and read its per-stage maps; their configs add only their heads' fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from torch import nn

from ..config import PYRAMID_ARCHS, PYRAMID_CONFIGS, HostConfig, PyramidConfig, StageGeometry
from ..errors import ConfigError
from ..registry import ARCHITECTURES
from ..validation import bounded

__all__ = ["PyramidHeadConfig", "PyramidHeadModel"]

_Config = TypeVar("_Config", bound="PyramidHeadConfig")


@dataclass
class PyramidHeadConfig(PyramidConfig):
    """A pyramid host's fields (its ``num_classes`` is the task's classes) and the host's ``backbone``.

    The host's ``head``/``class_token`` only say whether a class token joins the last stage.
    """

    backbone: str = bounded("pvt", choices=PYRAMID_ARCHS)
    """The pyramid host whose per-stage maps (``forward_features``) feed the head: 'pvt' or 'swin'."""
    sr_ratios: tuple[int, ...] | None = bounded(None, ge=1)
    """PVT backbone only: spatial-reduction ratio of keys and values per stage; None = no reduction."""
    window_size: int | None = bounded(None, ge=1)
    """Swin backbone only (required there): side of the attention windows, in tokens."""
    swin_v2: bool = False
    """Swin backbone only: Swin V2's blocks (see :class:`~vitpos.config.SwinConfig`)."""
    cosine_attention: bool | None = None
    """Swin backbone only: cosine attention with a learned logit scale; None: as swin_v2."""

    def _check_host(self) -> None:
        self._check_head()
        if self.backbone != "swin" and (self.swin_v2 or self.cosine_attention is not None):
            raise ConfigError(
                f"swin_v2 and cosine_attention belong to a Swin backbone, not backbone={self.backbone!r}; "
                "leave them out or use backbone='swin'"
            )
        self._backbone = self.backbone_config  # building the host's config checks the host's fields

    def _check_head(self) -> None:
        """The head's own checks."""

    def stage_geometry(self) -> list[StageGeometry]:
        """The backbone's stages."""
        return list(self._backbone.stages)

    @property
    def backbone_config(self) -> PyramidConfig:
        """The host's config: these pyramid fields with ``arch=backbone`` and no classifier."""
        host = PYRAMID_CONFIGS[self.backbone]
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(host) if f.name != "arch"}
        return PyramidConfig(**{**fields, **_foreign(self, host), "arch": self.backbone, "num_classes": 0})

    @classmethod
    def on(cls: type[_Config], host: PyramidConfig, **overrides: Any) -> _Config:
        """This head on the host ``host`` (a PVT or Swin config; its class count is left out), with ``overrides``."""
        fields = {f.name: getattr(host, f.name) for f in dataclasses.fields(host) if f.name != "num_classes"}
        arch = cls.__dataclass_fields__["arch"].default
        return cls(**{**fields, "arch": arch, "backbone": host.arch, **overrides})


def _foreign(config: PyramidHeadConfig, host: type[HostConfig]) -> dict[str, Any]:
    """The fields of ``config`` that belong to the other pyramid host (its config explains a value set there)."""
    return {name: getattr(config, name) for name in host.foreign_fields}


class PyramidHeadModel(nn.Module):
    """A dense task model holding a pyramid host at ``backbone`` (its state-dict names under ``backbone.``)."""

    def __init__(self, cfg: PyramidHeadConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        host = cfg.backbone_config
        self.backbone = ARCHITECTURES.get(host.arch)(host)

    @property
    def pretrained_host(self) -> nn.Module:
        """The part a classifier's weights initialise (``vitpos train --init``): the host, its classifier left out."""
        return self.backbone

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the host's four position slots, by its name in this model."""
        return {f"backbone.{n}": p for n, p in self.backbone.position_parameters().items()}

    def no_weight_decay(self) -> set[str]:
        """The host's decay-free parameters (class token, position parameters), by their names here."""
        return {f"backbone.{n}" for n in self.backbone.no_weight_decay()}
