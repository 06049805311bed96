"""Pyramid hosts' configs: the fields PVT and Swin share, and each one's own.

The stem cuts the image into ``patch_size`` patches; every later stage halves the grid (PVT: a
2x2 strided convolution, Swin: 2x2 patch merging), so the last stage's tokens are
``stride = patch_size * 2**(S-1)`` pixels wide and inputs must be multiples of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError
from ..validation import Allowed, bounded, check_value
from .host import HEADS, HostConfig, StageGeometry
from .position import SlotContext

__all__ = ["PyramidConfig", "PVTConfig", "SwinConfig", "PYRAMID_ARCHS", "PYRAMID_CONFIGS"]

PYRAMID_ARCHS = ("pvt", "swin")
_STAGE_FIELDS = ("embed_dims", "depths", "num_heads", "mlp_ratios")


class _PickedByArch(type):
    """Calling :class:`PyramidConfig` itself builds the config of its ``arch`` (PVT or Swin)."""

    def __call__(cls, *args: Any, **fields: Any) -> Any:
        if cls is not PyramidConfig:
            return super().__call__(*args, **fields)
        target = PYRAMID_CONFIGS[_pyramid_arch(fields.pop("arch", "pvt"))]
        return target(*args, **target.drop_foreign(fields))


def _pyramid_arch(arch: Any) -> str:
    return check_value("PyramidConfig.arch", arch, str, Allowed(choices=PYRAMID_ARCHS))


@dataclass(kw_only=True)
class PyramidConfig(HostConfig, metaclass=_PickedByArch):
    """The fields every pyramid host shares; per-stage sizes are tuples.

    ``PyramidConfig(arch="pvt" | "swin", ...)`` builds a :class:`PVTConfig` or :class:`SwinConfig`
    (and ``PyramidConfig.from_dict`` reads either), so configs written for the earlier single
    pyramid config keep working.
    """

    arch: str = bounded("pvt", choices=PYRAMID_ARCHS)
    """Host architecture: 'pvt' (global attention, optionally spatially reduced) or 'swin' (windows)."""
    patch_size: int = bounded(4, ge=1)
    """Stride of the stem; each later stage halves the grid."""
    embed_dims: tuple[int, ...] = bounded((64, 128, 320, 512), ge=1)
    """Token width of each stage."""
    depths: tuple[int, ...] = bounded((2, 2, 2, 2), ge=1)
    """Blocks per stage."""
    num_heads: tuple[int, ...] = bounded((1, 2, 5, 8), ge=1)
    """Attention heads per block, per stage."""
    mlp_ratios: tuple[float, ...] = bounded((8.0, 8.0, 4.0, 4.0), gt=0)
    """MLP hidden width as a multiple of the token width, per stage."""
    head: str = bounded("gap", choices=HEADS)
    """'gap': average the last stage's patch tokens; 'seq': their attention-weighted mean; 'cls' (PVT
    only): a class token joins the last stage."""

    def __post_init__(self) -> None:
        self._check_common()
        self._check_stages()
        self._check_host()
        h, w = self.image_hw
        stride = self.patch_size * 2 ** (len(self.depths) - 1)
        if h % stride or w % stride:
            raise ConfigError(
                f"img_size {self.img_size} is not divisible by the total stride {stride} "
                f"(patch_size {self.patch_size}, halved by each of {len(self.depths) - 1} later stages); "
                f"choose a multiple of {stride}"
            )
        self._resolve_stages()

    def _check_stages(self) -> None:
        lengths = {name: len(getattr(self, name)) for name in _STAGE_FIELDS}
        lengths.update(self._own_stage_lengths())
        if len(set(lengths.values())) != 1 or not self.depths:
            sizes = ", ".join(f"{k}={v}" for k, v in lengths.items())
            raise ConfigError(f"every per-stage field needs one entry per stage (at least one stage), got {sizes}")
        for stage, (dim, heads) in enumerate(zip(self.embed_dims, self.num_heads, strict=True)):
            if dim % heads:
                raise ConfigError(
                    f"stage {stage}: width {dim} is not divisible by {heads} heads; "
                    "choose head counts that divide the widths"
                )

    def _own_stage_lengths(self) -> dict[str, int]:
        """The lengths of the host's own per-stage fields, checked with the shared ones."""
        return {}

    def _check_host(self) -> None:
        """The host's own checks."""

    def stage_geometry(self) -> list[StageGeometry]:
        """Stage s: ``patch_size * 2**s`` pixels per token; the class token joins the last stage only (as in PVT)."""
        h, w = self.image_hw
        stages = []
        for s, (dim, depth, heads, ratio) in enumerate(
            zip(self.embed_dims, self.depths, self.num_heads, self.mlp_ratios, strict=True)
        ):
            stride = self.patch_size * 2**s
            prefix = int(bool(self.class_token) and s == len(self.depths) - 1)
            ctx = SlotContext(dim, heads, depth, (h // stride, w // stride), prefix)
            stages.append(StageGeometry(ctx, ratio, stride, self.relative_context(ctx)))
        return stages

    def relative_context(self, ctx: SlotContext) -> SlotContext:
        """What the relative encodings of a stage with context ``ctx`` are built from (default: the stage's)."""
        return ctx

    @classmethod
    def reading_class(cls, data: dict[str, Any]) -> type[HostConfig]:
        """The config of ``data['arch']`` when read through :class:`PyramidConfig` itself."""
        if cls is not PyramidConfig:
            return cls
        return PYRAMID_CONFIGS[_pyramid_arch(data.get("arch", "pvt"))]


@dataclass(kw_only=True)
class PVTConfig(PyramidConfig):
    """PVT (Wang et al., ICCV 2021): global attention, keys and values optionally spatially reduced."""

    sr_ratios: tuple[int, ...] | None = bounded(None, ge=1)
    """Spatial-reduction ratio of keys and values per stage; None = no reduction."""

    foreign_fields: ClassVar[dict[str, str]] = {
        "window_size": "arch='pvt' attends globally; window_size is for arch='swin', set it to None"
    }

    def _own_stage_lengths(self) -> dict[str, int]:
        return {} if self.sr_ratios is None else {"sr_ratios": len(self.sr_ratios)}

    def _check_host(self) -> None:
        if self.arch != "pvt":
            raise ConfigError(f"a PVTConfig has arch='pvt', got {self.arch!r}; use SwinConfig for arch='swin'")
        reduced = [s for s, r in enumerate(self.sr_ratios or ()) if r > 1]
        if reduced and self.position.spec("relative").name != "none":
            raise ConfigError(
                f"relative='{self.position.relative}' needs keys on the query grid, but spatial-reduction attention "
                f"puts the keys of stage(s) {', '.join(map(str, reduced))} on a coarser grid "
                f"(sr_ratios={self.sr_ratios}); "
                "set sr_ratios=None for full attention, or use a windowed host (arch='swin')"
            )

    def sr_ratio(self, stage: int) -> int:
        """The spatial-reduction ratio of ``stage`` (1: plain attention)."""
        return self.sr_ratios[stage] if self.sr_ratios else 1


@dataclass(kw_only=True)
class SwinConfig(PyramidConfig):
    """Swin (Liu et al., ICCV 2021): attention within (shifted) windows, relative encodings per window."""

    arch: str = bounded("swin", choices=PYRAMID_ARCHS)
    """Host architecture: 'swin'."""
    window_size: int | None = bounded(7, ge=1)
    """Side of the attention windows, in tokens (Swin: 7); required."""
    swin_v2: bool = False
    """Swin V2's blocks (Liu et al., CVPR 2022): each branch's output normalised before the residual
    (x + norm(attn(x)), x + norm(mlp(x))), biases on queries and values only, patch merging with its norm
    after the reduction, and cosine attention unless cosine_attention=False (use it with relative='cpb')."""
    cosine_attention: bool | None = None
    """Cosine attention with a learned per-head logit scale (Swin V2) instead of the scaled dot
    product; None: as swin_v2."""

    foreign_fields: ClassVar[dict[str, str]] = {
        "sr_ratios": "arch='swin' attends within windows and has no spatial reduction; set sr_ratios=None"
    }

    def _check_host(self) -> None:
        if self.arch != "swin":
            raise ConfigError(f"a SwinConfig has arch='swin', got {self.arch!r}; use PVTConfig for arch='pvt'")
        _ = self.window  # raises without one
        if self.class_token:
            raise ConfigError("arch='swin' has no class token (window attention has no place for one); use head='gap'")

    def relative_context(self, ctx: SlotContext) -> SlotContext:
        """One window, without prefix tokens: relative encodings see the window grid."""
        return SlotContext(ctx.embed_dim, ctx.num_heads, ctx.depth, (self.window, self.window), 0)

    @property
    def cosine(self) -> bool:
        """Whether the blocks attend by cosine similarity: ``cosine_attention``, or by default ``swin_v2``."""
        return self.swin_v2 if self.cosine_attention is None else self.cosine_attention

    @property
    def window(self) -> int:
        """The window side: ``window_size``, which validation requires."""
        if self.window_size is None:
            raise ConfigError("arch='swin' needs a positive window_size (Swin uses 7), got None")
        return self.window_size


PYRAMID_CONFIGS: dict[str, type[PyramidConfig]] = {"pvt": PVTConfig, "swin": SwinConfig}
"""The config of each pyramid host, by ``arch``."""
