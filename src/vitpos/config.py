"""Serialisable model configs: the four position slots, the fields every host shares, and each host's own.

:class:`HostConfig` holds what every host has (image, head, dropout, slots) and states the
stage geometry tools read (number of stages, widths, grids, prefix tokens). :class:`ModelConfig`
is the plain ViT, a pyramid of one stage; :class:`PyramidConfig` the PVT and Swin pyramids.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError
from .registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE, Registry
from .spec import SlotSpec
from .validation import bounded, check_fields

if TYPE_CHECKING:
    from .encodings.base import SlotContext

__all__ = [
    "PositionConfig",
    "HostConfig",
    "ModelConfig",
    "PyramidConfig",
    "HOST_CONFIGS",
    "PYRAMID_ARCHS",
    "SLOT_NAMES",
    "slot_registry",
]

SLOT_NAMES = ("absolute", "join", "conditional", "relative")
_Config = TypeVar("_Config", bound="HostConfig")
_SLOT_REGISTRIES: dict[str, Registry] = {
    "absolute": ABSOLUTE,
    "join": JOIN,
    "conditional": CONDITIONAL,
    "relative": RELATIVE,
}


def slot_registry(slot: str) -> Registry:
    """The registry of the values of ``slot`` (one of :data:`SLOT_NAMES`)."""
    if slot not in _SLOT_REGISTRIES:
        raise ConfigError(f"unknown position slot {slot!r}; the slots are {', '.join(SLOT_NAMES)}")
    return _SLOT_REGISTRIES[slot]


@dataclass
class PositionConfig:
    """The four orthogonal position slots, each named by its short string form."""

    absolute: str = "learned"
    """A signal per grid cell: none, learned, sincos1d, sincos2d, learnable_sincos, fourier."""
    join: str = "input"
    """Where the absolute signal enters the blocks (input = once, before block 0)."""
    conditional: str = "none"
    """Generators that look at the tokens between blocks (PEG)."""
    relative: str = "none"
    """Terms inside attention that depend on the query-key offset."""

    def __post_init__(self) -> None:
        check_fields(self)
        for slot in SLOT_NAMES:
            spec = SlotSpec.parse(getattr(self, slot))
            entry = slot_registry(slot).get(spec.name)
            entry.validate(spec)
            setattr(self, slot, str(spec))
        for slot in SLOT_NAMES:
            self.entry(slot).check_combination(self)

    def spec(self, slot: str) -> SlotSpec:
        """The parsed spec of ``slot``."""
        return SlotSpec.parse(getattr(self, slot))

    def entry(self, slot: str) -> Any:
        """The registered class that implements the value of ``slot``."""
        return slot_registry(slot).get(self.spec(slot).name)

    def to_dict(self) -> dict[str, str]:
        """Plain dict, for YAML/JSON."""
        return dataclasses.asdict(self)


@dataclass(kw_only=True)
class HostConfig:
    """The fields and behaviour every host's config shares: image, head, dropout, position slots.

    A host is a pyramid of stages (the plain ViT has one); its config says how many
    (:attr:`num_stages`), how wide (:attr:`embed_dims`), on which grids (:meth:`stage_grids`)
    and with how many prefix tokens (:meth:`stage_prefix_tokens`), without building the model.
    Subclasses add their own fields (fields are keyword-only, so each host may change a default)
    and call :meth:`_check_common` in ``__post_init__``.
    """

    arch: str = "vit"
    """Host architecture (registered in ``vitpos.registry.ARCHITECTURES``)."""
    img_size: int | tuple[int, int] = bounded(224, ge=1)
    """Training image size; sets the native grid of learned tables (per stage)."""
    patch_size: int = bounded(16, ge=1)
    """Side of the square, non-overlapping patches of the stem, in pixels."""
    in_chans: int = bounded(3, ge=1)
    """Input image channels."""
    num_classes: int = bounded(1000, ge=0)
    """Output classes (or regression targets); 0 gives features only."""
    qkv_bias: bool = True
    """Biases on the query, key and value projections."""
    head: str = bounded("cls", choices=("cls", "gap"))
    """'cls': classify from the class token; 'gap': average the last stage's patch tokens."""
    class_token: bool | None = None
    """Prepend a class token (to the last stage); defaults to True for head='cls' and False for head='gap'."""
    drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on tokens, MLP outputs and the head input."""
    attn_drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on attention weights."""
    drop_path_rate: float = bounded(0.0, ge=0, lt=1)
    """Stochastic depth: drop rate of the last block, rising linearly from 0 over all blocks."""
    position: PositionConfig = field(default_factory=PositionConfig)
    """The four position slots, built per stage."""

    def _check_common(self) -> None:
        """Check every field's type and range (normalising loaded lists and dicts), then the head."""
        check_fields(self)
        if self.class_token is None:
            self.class_token = self.head == "cls"
        if self.head == "cls" and not self.class_token:
            raise ConfigError("head='cls' needs class_token=True; use head='gap' for a model without one")

    @property
    def image_hw(self) -> tuple[int, int]:
        """The training image size as (height, width)."""
        size = self.img_size
        return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))

    @property
    def num_stages(self) -> int:
        """Number of stages S."""
        return len(self.embed_dims)

    @property
    def stride(self) -> int:
        """Pixels per last-stage token: inputs must be a multiple of it."""
        raise NotImplementedError

    @property
    def embed_dims(self) -> tuple[int, ...]:
        """Token width of each stage."""
        raise NotImplementedError

    @property
    def mlp_ratios(self) -> tuple[float, ...]:
        """MLP hidden width as a multiple of the token width, per stage."""
        raise NotImplementedError

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of every stage for an image of size ``image_hw``; a ValueError if it does not fit."""
        raise NotImplementedError

    def stage_grid(self, stage: int, image_hw: tuple[int, int] | None = None) -> tuple[int, int]:
        """The token grid (H, W) of ``stage`` for ``image_hw`` (default: the training size)."""
        return self.stage_grids(image_hw or self.image_hw)[stage]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Prefix tokens (class, then register tokens) in ``stage``."""
        raise NotImplementedError

    @property
    def num_prefix_tokens(self) -> int:
        """Prefix tokens of the last stage, whose tokens the head pools."""
        return self.stage_prefix_tokens(self.num_stages - 1)

    def stage_context(self, stage: int) -> SlotContext:
        """What the slot modules of ``stage`` are built from: width, heads, depth, native grid, prefix tokens."""
        raise NotImplementedError

    def replace(self: _Config, **overrides: Any) -> _Config:
        """A copy with fields replaced; slot names (absolute, join, ...) update ``position``."""
        fields = {f.name for f in dataclasses.fields(self)}
        slots = {k: overrides.pop(k) for k in list(overrides) if k in SLOT_NAMES}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            valid = ", ".join(sorted(fields | set(SLOT_NAMES)))
            raise TypeError(
                f"unknown model option(s) {', '.join(unknown)} for arch={self.arch!r} ({type(self).__name__}); "
                f"valid options: {valid}"
            )
        position = overrides.pop("position", self.position)
        if isinstance(position, dict):
            position = PositionConfig(**position)
        if slots:
            position = PositionConfig(**{**position.to_dict(), **slots})
        if "head" in overrides and "class_token" not in overrides:
            overrides["class_token"] = None
        return dataclasses.replace(self, position=position, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict, for YAML/JSON (tuples become lists)."""
        return {k: _plain(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls: type[_Config], data: dict[str, Any]) -> _Config:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ConfigError(f"a {cls.__name__} is read from a mapping of its fields, got {type(data).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ConfigError(
                f"unknown model config key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(fields))}"
            )
        return cls(**data)


def _plain(value: Any) -> Any:
    """``value`` with every tuple turned into a list (YAML's safe dumper has no tuples)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(kw_only=True)
class ModelConfig(HostConfig):
    """Everything needed to build a plain ViT (a pyramid of one stage); presets are instances of this class."""

    arch: str = bounded("vit", choices=("vit",))
    """Host architecture: 'vit' (a plain ViT), 'pvt' or 'swin' (pyramids)."""
    embed_dim: int = bounded(192, ge=1)
    """Token width D."""
    depth: int = bounded(12, ge=1)
    """Number of encoder blocks."""
    num_heads: int = bounded(3, ge=1)
    """Attention heads per block."""
    mlp_ratio: float = bounded(4.0, gt=0)
    """MLP hidden width as a multiple of the token width."""
    reg_tokens: int = bounded(0, ge=0)
    """Extra learned prefix tokens (registers) after the class token."""
    pad_to_patch: bool = False
    """Zero-pad inputs whose size is not a multiple of the patch size instead of raising."""

    def __post_init__(self) -> None:
        self._check_common()
        if self.embed_dim % self.num_heads:
            raise ConfigError(
                f"embed_dim={self.embed_dim} is not divisible by num_heads={self.num_heads}; "
                "choose a head count that divides the width"
            )
        h, w = self.image_hw
        if not self.pad_to_patch and (h % self.patch_size or w % self.patch_size):
            raise ConfigError(
                f"img_size {self.img_size} is not divisible by patch_size {self.patch_size}; "
                "change the size or set pad_to_patch=True"
            )

    @property
    def grid(self) -> tuple[int, int]:
        """The native token grid (H, W) in patches."""
        return self.stage_grid(0)

    @property
    def stride(self) -> int:
        """Pixels per token: the patch size."""
        return self.patch_size

    @property
    def embed_dims(self) -> tuple[int, ...]:
        """Token width of the one stage: ``(embed_dim,)``."""
        return (self.embed_dim,)

    @property
    def mlp_ratios(self) -> tuple[float, ...]:
        """MLP ratio of the one stage: ``(mlp_ratio,)``."""
        return (self.mlp_ratio,)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of the one stage for an image of size ``image_hw``; raises if it does not fit."""
        from .grid import patch_grid  # grids are torch's business: config stays importable without it

        return [patch_grid(image_hw, self.patch_size, pad=self.pad_to_patch)]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Class token plus registers (the one stage holds them)."""
        return int(bool(self.class_token)) + self.reg_tokens

    def stage_context(self, stage: int) -> SlotContext:
        from .encodings.base import SlotContext  # the slot registries' package: imported when a model is built

        return SlotContext(self.embed_dim, self.num_heads, self.depth, self.grid, self.num_prefix_tokens)


PYRAMID_ARCHS = ("pvt", "swin")
_STAGE_FIELDS = ("embed_dims", "depths", "num_heads", "mlp_ratios")


@dataclass(kw_only=True)
class PyramidConfig(HostConfig):
    """Everything needed to build a PVT-style or Swin-style pyramid; per-stage sizes are tuples.

    The stem cuts the image into ``patch_size`` patches; every later stage halves the grid
    (PVT: a 2x2 strided convolution, Swin: 2x2 patch merging), so the last stage's tokens are
    ``stride = patch_size * 2**(S-1)`` pixels wide and inputs must be multiples of it.
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
    sr_ratios: tuple[int, ...] | None = bounded(None, ge=1)
    """PVT only: spatial-reduction ratio of keys and values per stage; None = no reduction."""
    window_size: int | None = bounded(None, ge=1)
    """Swin only (required there): side of the attention windows, in tokens."""
    head: str = bounded("gap", choices=("cls", "gap"))
    """'gap': average the last stage's patch tokens; 'cls' (PVT only): a class token joins the last stage."""

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
        for stage, (dim, heads) in enumerate(zip(self.embed_dims, self.num_heads, strict=True)):
            if dim % heads:
                raise ConfigError(
                    f"stage {stage}: width {dim} is not divisible by {heads} heads; "
                    "choose head counts that divide the widths"
                )

    def _check_host(self) -> None:
        if self.arch == "swin":
            if self.window_size is None or self.window_size <= 0:
                raise ConfigError(f"arch='swin' needs a positive window_size (Swin uses 7), got {self.window_size}")
            if self.sr_ratios is not None:
                raise ConfigError("arch='swin' attends within windows and has no spatial reduction; set sr_ratios=None")
            if self.class_token:
                raise ConfigError(
                    "arch='swin' has no class token (window attention has no place for one); use head='gap'"
                )
            return
        if self.window_size is not None:
            raise ConfigError("arch='pvt' attends globally; window_size is for arch='swin', set it to None")
        reduced = [s for s, r in enumerate(self.sr_ratios or ()) if r > 1]
        if reduced and self.position.spec("relative").name != "none":
            raise ConfigError(
                f"relative='{self.position.relative}' needs keys on the query grid, but spatial-reduction attention "
                f"puts the keys of stage(s) {', '.join(map(str, reduced))} on a coarser grid "
                f"(sr_ratios={self.sr_ratios}); "
                "set sr_ratios=None for full attention, or use a windowed host (arch='swin')"
            )

    @property
    def stride(self) -> int:
        """Pixels per last-stage token: inputs must be a multiple of it."""
        return self.patch_size * 2 ** (self.num_stages - 1)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of every stage for an image of size ``image_hw``; raises if it does not fit."""
        h, w = image_hw
        if h % self.stride or w % self.stride:
            raise ValueError(
                f"image size {h}x{w} is not divisible by this pyramid's total stride {self.stride} "
                f"(patch {self.patch_size}, then 2 per later stage); resize the input to a multiple of {self.stride}"
            )
        return [(h // (self.patch_size * 2**s), w // (self.patch_size * 2**s)) for s in range(self.num_stages)]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Prefix tokens in ``stage``: the class token joins the last stage only (as in PVT)."""
        return int(bool(self.class_token) and stage == self.num_stages - 1)

    def stage_context(self, stage: int) -> SlotContext:
        from .encodings.base import SlotContext  # the slot registries' package: imported when a model is built

        grid, prefix = self.stage_grid(stage), self.stage_prefix_tokens(stage)
        return SlotContext(self.embed_dims[stage], self.num_heads[stage], self.depths[stage], grid, prefix)


HOST_CONFIGS: tuple[type[HostConfig], ...] = (ModelConfig, PyramidConfig)
"""The config class of every host (the command line offers the union of their fields)."""
