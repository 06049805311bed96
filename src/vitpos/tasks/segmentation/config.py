"""The config of a Semantic FPN segmenter: a pyramid host (PVT or Swin, any slot values) plus the
FPN neck and the semantic head of Kirillov et al. (CVPR 2019), as CPVT (§B.6, Table 13) uses it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...config import PYRAMID_ARCHS, PYRAMID_CONFIGS, HostConfig, PyramidConfig, StageGeometry
from ...data.masks import IGNORE_INDEX
from ...errors import ConfigError
from ...validation import bounded

__all__ = ["SemanticFPNConfig", "IGNORE_INDEX"]


@dataclass
class SemanticFPNConfig(PyramidConfig):
    """A pyramid host's fields (its ``num_classes`` is the segmentation classes) and the dense head's.

    The host is built from :attr:`backbone_config`: the same fields with ``arch=backbone`` and no
    classifier; its ``head``/``class_token`` only say whether a class token joins the last stage.
    """

    arch: str = bounded("semantic_fpn", choices=("semantic_fpn",))
    """Always 'semantic_fpn'; the host is :attr:`backbone`."""
    num_classes: int = bounded(150, ge=1)
    """Segmentation classes (ADE20K: 150), without the ignored label 255."""
    backbone: str = bounded("pvt", choices=PYRAMID_ARCHS)
    """The pyramid host whose per-stage maps (``forward_features``) feed the FPN: 'pvt' or 'swin'."""
    sr_ratios: tuple[int, ...] | None = bounded(None, ge=1)
    """PVT backbone only: spatial-reduction ratio of keys and values per stage; None = no reduction."""
    window_size: int | None = bounded(None, ge=1)
    """Swin backbone only (required there): side of the attention windows, in tokens."""
    fpn_dim: int = bounded(256, ge=1)
    """Channels of the FPN neck's outputs (256 in FPN, Semantic FPN and CPVT's PVT setting)."""
    head_dim: int = bounded(128, ge=1)
    """Channels of the semantic head's upsampling stages (128 in Semantic FPN)."""
    norm_groups: int = bounded(32, ge=1)
    """GroupNorm groups in the head's stages (32, Kirillov et al.); must divide head_dim."""
    head_dropout: float = bounded(0.1, ge=0, lt=1)
    """Channel dropout before the classifier: 0.1 in the released PVT/CPVT configs (mmseg's FPNHead);
    the paper has none (set 0)."""

    @property
    def task(self) -> str:
        """What the model predicts: ``segmentation`` (a class per pixel)."""
        return "segmentation"

    def _check_host(self) -> None:
        if self.head_dim % self.norm_groups:
            raise ConfigError(
                f"head_dim={self.head_dim} is not divisible by norm_groups={self.norm_groups}; "
                "choose a group count that divides head_dim"
            )
        self._backbone = self.backbone_config  # building the host's config checks the host's fields

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
    def on(cls, host: PyramidConfig, **overrides: Any) -> SemanticFPNConfig:
        """A Semantic FPN on the host ``host`` (a PVT or Swin config), with ``overrides``."""
        fields = {f.name: getattr(host, f.name) for f in dataclasses.fields(host)}
        return cls(**{**fields, "arch": "semantic_fpn", "backbone": host.arch, "num_classes": 150, **overrides})


def _foreign(config: SemanticFPNConfig, host: type[HostConfig]) -> dict[str, Any]:
    """The fields of ``config`` that belong to the other pyramid host (its config explains a value set there)."""
    return {name: getattr(config, name) for name in host.foreign_fields}
