"""The config of the hierarchical hosts: a PVT-style pyramid and a Swin-style windowed transformer.

A pyramid has S stages. The stem cuts the image into ``patch_size`` patches; every later stage
halves the grid (PVT: a 2x2 strided convolution, Swin: 2x2 patch merging), so the last stage's
tokens are ``stride = patch_size * 2**(S-1)`` pixels wide and inputs must be multiples of it.
The four position slots apply per stage, each built at the stage's width, depth and grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import HostConfig, PositionConfig
from .errors import ConfigError
from .validation import bounded

__all__ = ["PyramidConfig", "PYRAMID_ARCHS"]

PYRAMID_ARCHS = ("pvt", "swin")
_STAGE_FIELDS = ("embed_dims", "depths", "num_heads", "mlp_ratios")


@dataclass
class PyramidConfig(HostConfig):
    """Everything needed to build a pyramid host; per-stage sizes are tuples, one entry per stage."""

    arch: str = bounded("pvt", choices=PYRAMID_ARCHS)
    """Host architecture: 'pvt' (global attention, optionally spatially reduced) or 'swin' (windows)."""
    img_size: int | tuple[int, int] = bounded(224, ge=1)
    """Training image size; sets the native grid of each stage (learned tables are per stage)."""
    patch_size: int = bounded(4, ge=1)
    """Stride of the stem; each later stage halves the grid."""
    in_chans: int = bounded(3, ge=1)
    """Input image channels."""
    num_classes: int = bounded(1000, ge=0)
    """Output classes (or regression targets); 0 gives features only."""
    embed_dims: tuple[int, ...] = bounded((64, 128, 320, 512), ge=1)
    """Token width of each stage."""
    depths: tuple[int, ...] = bounded((2, 2, 2, 2), ge=1)
    """Blocks per stage."""
    num_heads: tuple[int, ...] = bounded((1, 2, 5, 8), ge=1)
    """Attention heads per block, per stage."""
    mlp_ratios: tuple[float, ...] = bounded((8.0, 8.0, 4.0, 4.0), gt=0)
    """MLP hidden width as a multiple of the token width, per stage."""
    sr_ratios: tuple[int, ...] | None = bounded(None, ge=1)
    """PVT only: spatial-reduction ratio of keys and values per stage; None = no reduction."""
    window_size: int | None = bounded(None, ge=1)
    """Swin only (required there): side of the attention windows, in tokens."""
    qkv_bias: bool = True
    """Biases on the query, key and value projections."""
    head: str = bounded("gap", choices=("cls", "gap"))
    """'gap': average the last stage's patch tokens; 'cls' (PVT only): a class token joins the last stage."""
    class_token: bool | None = None
    """Prepend a class token to the last stage; defaults to True for head='cls'."""
    drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on tokens, MLP outputs and the head input."""
    attn_drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on attention weights."""
    drop_path_rate: float = bounded(0.0, ge=0, lt=1)
    """Stochastic depth: drop rate of the last block, rising linearly from 0 over all stages."""
    position: PositionConfig = field(default_factory=PositionConfig)

    def __post_init__(self) -> None:
        self._check_common()
        self._check_stages()
        self._check_host()
        h, w = self.image_hw
        if h % self.stride or w % self.stride:
            raise ConfigError(
                f"img_size {self.img_size} is not divisible by the total stride {self.stride} "
                f"(patch_size {self.patch_size}, halved by each of {self.num_stages - 1} later stages); "
                f"choose a multiple of {self.stride}"
            )

    def _check_stages(self) -> None:
        lengths = {name: len(getattr(self, name)) for name in _STAGE_FIELDS}
        if self.sr_ratios is not None:
            lengths["sr_ratios"] = len(self.sr_ratios)
        if len(set(lengths.values())) != 1 or self.num_stages == 0:
            sizes = ", ".join(f"{k}={v}" for k, v in lengths.items())
            raise ConfigError(f"every per-stage field needs one entry per stage (at least one stage), got {sizes}")
        for stage, (dim, heads) in enumerate(zip(self.embed_dims, self.num_heads)):
            if dim % heads:
                raise ConfigError(
                    f"stage {stage}: width {dim} is not divisible by {heads} heads; choose head counts that divide the widths"
                )

    def _check_host(self) -> None:
        if self.arch == "swin":
            if self.window_size is None or self.window_size <= 0:
                raise ConfigError(f"arch='swin' needs a positive window_size (Swin uses 7), got {self.window_size}")
            if self.sr_ratios is not None:
                raise ConfigError("arch='swin' attends within windows and has no spatial reduction; set sr_ratios=None")
            if self.class_token:
                raise ConfigError("arch='swin' has no class token (window attention has no place for one); use head='gap'")
            return
        if self.window_size is not None:
            raise ConfigError("arch='pvt' attends globally; window_size is for arch='swin', set it to None")
        reduced = [s for s, r in enumerate(self.sr_ratios or ()) if r > 1]
        if reduced and self.position.spec("relative").name != "none":
            raise ConfigError(
                f"relative='{self.position.relative}' needs keys on the query grid, but spatial-reduction attention "
                f"puts the keys of stage(s) {', '.join(map(str, reduced))} on a coarser grid (sr_ratios={self.sr_ratios}); "
                "set sr_ratios=None for full attention, or use a windowed host (arch='swin')"
            )

    @property
    def num_stages(self) -> int:
        """Number of stages S."""
        return len(self.depths)

    @property
    def stride(self) -> int:
        """Pixels per last-stage token: inputs must be a multiple of it."""
        return self.patch_size * 2 ** (self.num_stages - 1)

    def stage_grid(self, stage: int, image_hw: tuple[int, int] | None = None) -> tuple[int, int]:
        """The token grid (H, W) of ``stage`` for ``image_hw`` (default: the training size)."""
        step = self.patch_size * 2**stage
        h, w = image_hw or self.image_hw
        return (h // step, w // step)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of every stage for an image of size ``image_hw``; raises if it does not fit."""
        h, w = image_hw
        if h % self.stride or w % self.stride:
            raise ValueError(
                f"image size {h}x{w} is not divisible by this pyramid's total stride {self.stride} "
                f"(patch {self.patch_size}, then 2 per later stage); resize the input to a multiple of {self.stride}"
            )
        return [self.stage_grid(s, image_hw) for s in range(self.num_stages)]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Prefix tokens in ``stage``: the class token joins the last stage only (as in PVT)."""
        return int(bool(self.class_token) and stage == self.num_stages - 1)

    @property
    def num_prefix_tokens(self) -> int:
        """Prefix tokens of the last stage, whose tokens the head pools."""
        return self.stage_prefix_tokens(self.num_stages - 1)
