"""The configuration of the DETR-style detector (:mod:`.model`).

Its encoder is one stage of blocks on the backbone's grid, with the four position slots as on
every host: the shared fields (image size, classes, drop rates, ``position``) come from
:class:`~vitpos.config.HostConfig`; DETR adds its backbone, decoder, queries and loss weights.
``patch_size`` is the backbone's stride: the pixels per encoder token (DETR-R50: 32).

The backbone is a CNN stem (``stem_widths``, in ResNet-50's role) or, with ``backbone``, any vitpos
host (ViT, PVT, Swin, with its own slots) whose stage ``backbone_stage`` feeds the encoder; the
encoder keeps its own slots (``position``). :meth:`DetrConfig.on` builds such a config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...config import HostConfig, PositionConfig, SlotContext, StageGeometry
from ...errors import ConfigError
from ...registry import ARCHITECTURES
from ...validation import bounded

Grid = tuple[int, int]

__all__ = ["DetrConfig"]


@dataclass(kw_only=True)
class DetrConfig(HostConfig):
    """Everything needed to build a :class:`~.model.DETR`; presets are instances."""

    arch: str = bounded("detr", choices=("detr",))
    """Host architecture: 'detr' (the detector)."""
    img_size: int | tuple[int, int] = bounded(32, ge=1)
    """Training image size; sets the native grid of learned tables."""
    patch_size: int = bounded(4, ge=1)
    """The backbone's stride in pixels: one encoder token per patch_size x patch_size pixels."""
    num_classes: int = bounded(4, ge=1)
    """Object classes; the class head has one more output, "no object"."""
    stem_widths: tuple[int, ...] = bounded((32, 64), ge=1)
    """Channels of the CNN stem's stride-2 3x3 convolutions (GroupNorm, ReLU), in the backbone's
    role (DETR's ResNet-50); there are log2(patch_size) of them."""
    embed_dim: int = bounded(64, ge=1)
    """Transformer width (DETR: 256)."""
    num_heads: int = bounded(4, ge=1)
    """Attention heads of every encoder and decoder layer (DETR: 8)."""
    enc_depth: int = bounded(2, ge=1)
    """Encoder blocks (DETR: 6)."""
    dec_depth: int = bounded(2, ge=1)
    """Decoder layers (DETR: 6)."""
    mlp_ratio: float = bounded(4.0, gt=0)
    """Feed-forward width as a multiple of embed_dim (DETR: 2048 / 256 = 8)."""
    num_queries: int = bounded(8, ge=1)
    """Learned object queries: the most objects one image can yield (DETR: 100)."""
    aux_loss: bool = True
    """Add the set loss of every decoder layer's output (DETR's auxiliary decoding losses)."""
    cost_class: float = bounded(1.0, ge=0)
    """Weight of the class term in matching and in the loss (DETR: 1)."""
    cost_bbox: float = bounded(5.0, ge=0)
    """Weight of the L1 box term in matching and in the loss (DETR: 5)."""
    cost_giou: float = bounded(2.0, ge=0)
    """Weight of the generalised-IoU term in matching and in the loss (DETR: 2)."""
    eos_coef: float = bounded(0.1, ge=0)
    """Class weight of "no object" in the cross entropy (DETR: 0.1)."""
    backbone: HostConfig | None = None
    """A vitpos host in the backbone's role (its classifier left out); None: the CNN stem."""
    backbone_stage: int = bounded(-1, ge=-16, le=15)
    """The backbone host's stage whose map feeds the encoder (default: the last)."""
    head: str = bounded("detr", choices=("detr",))
    """The detection heads: class and box per query."""
    class_token: bool | None = False
    """DETR has no prefix tokens."""
    position: PositionConfig = field(default_factory=lambda: PositionConfig(absolute="sine", join="detr"))
    """The four position slots of the encoder (DETR: sine, added to queries and keys of every layer)."""

    def __post_init__(self) -> None:
        if isinstance(self.backbone, dict):  # read back from to_dict(): the config class its arch reads
            self.backbone = ARCHITECTURES.get(self.backbone.get("arch", "vit")).config_class.from_dict(self.backbone)
        self._check_common()
        if self.class_token:
            raise ConfigError("DETR has no class token; leave class_token=False")
        if self.embed_dim % self.num_heads:
            raise ConfigError(
                f"embed_dim={self.embed_dim} is not divisible by num_heads={self.num_heads}; "
                "choose a head count that divides the width"
            )
        if self.backbone is not None:
            self._check_backbone(self.backbone)
        elif 2 ** len(self.stem_widths) != self.patch_size:
            raise ConfigError(
                f"the stem halves the image once per width in stem_widths={self.stem_widths} "
                f"(stride {2 ** len(self.stem_widths)}), "
                f"but patch_size={self.patch_size}; give log2(patch_size) widths"
            )
        self._resolve_stages()

    def _check_backbone(self, host: HostConfig) -> None:
        """The host's stage exists, its stride is ``patch_size`` and it takes our images."""
        if host.num_classes != 0:
            raise ConfigError(f"DETR's backbone {host.arch} must have num_classes=0 (no classifier); use DetrConfig.on")
        if not -host.num_stages <= self.backbone_stage < host.num_stages:
            raise ConfigError(
                f"backbone_stage={self.backbone_stage} but the {host.arch} backbone has {host.num_stages} stage(s); "
                f"give a stage in 0..{host.num_stages - 1} (or -1, the last)"
            )
        stride = host.stages[self.backbone_stage].stride
        if stride != self.patch_size or host.in_chans != self.in_chans:
            raise ConfigError(
                f"the {host.arch} backbone's stage {self.backbone_stage} has stride {stride} and takes "
                f"{host.in_chans} channels, but patch_size={self.patch_size} and in_chans={self.in_chans}; "
                f"set patch_size={stride}, in_chans={host.in_chans} (DetrConfig.on does)"
            )

    @property
    def backbone_channels(self) -> int:
        """Channels of the map the encoder reads: the stem's last width or the host stage's width."""
        if self.backbone is None:
            return self.stem_widths[-1]
        return self.backbone.embed_dims[self.backbone_stage]

    @classmethod
    def on(cls, host: HostConfig, stage: int = -1, **overrides: Any) -> DetrConfig:
        """A DETR whose backbone is ``host`` (its classifier dropped) at stage ``stage``, with ``overrides``."""
        host = host.replace(num_classes=0)
        stride = host.stages[stage].stride
        return cls(backbone=host, backbone_stage=stage, patch_size=stride, in_chans=host.in_chans, **overrides)

    @property
    def task(self) -> str:
        """What the model predicts: ``detection``."""
        return "detection"

    def stage_geometry(self) -> list[StageGeometry]:
        """The encoder: one stage of ``enc_depth`` blocks at the backbone's stride, no prefix tokens."""
        (grid,) = self.stage_grids(self.image_hw)
        ctx = SlotContext(self.embed_dim, self.num_heads, self.enc_depth, grid, 0)
        return [StageGeometry(ctx, self.mlp_ratio, self.patch_size, ctx)]

    @property
    def grid(self) -> Grid:
        """The encoder's native grid (H, W)."""
        return self.stage_grid(0)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        """The encoder's grid for an image of ``image_hw``; raises if the stride does not divide it."""
        h, w = image_hw
        if h % self.patch_size or w % self.patch_size:
            raise ConfigError(
                f"image size {h}x{w} is not divisible by the backbone's stride {self.patch_size}; "
                f"resize the input to a multiple of {self.patch_size}"
            )
        return [(h // self.patch_size, w // self.patch_size)]
