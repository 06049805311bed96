"""The fields every host's config shares, and the stage geometry each host computes once.

:class:`HostConfig` holds what every host has (image, head, dropout, position slots). Each
host's config says what its stages are (:meth:`HostConfig.stage_geometry`: width, depth,
heads, MLP ratio, stride, native grid, prefix tokens, the grid relative encodings see); the
geometry is computed when the config is validated, and tools read it without building a model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import ConfigError
from ..memory import batch_bytes, check_fits, model_bytes
from ..registry import ARCHITECTURES
from ..validation import bounded, check_fields
from .position import SLOT_NAMES, PositionConfig, SlotContext

if TYPE_CHECKING:
    from torch import nn

__all__ = ["HostConfig", "StageGeometry", "HEADS"]

HEADS = ("cls", "gap", "seq")
"""How a host pools its last stage's tokens: class token, global average, sequence pooling."""

_Config = TypeVar("_Config", bound="HostConfig")


@dataclass(frozen=True)
class StageGeometry:
    """The sizes of one stage, fixed by its host's config."""

    context: SlotContext
    """Width, heads, depth, native grid and prefix tokens: what the stage's slot modules are built from."""
    mlp_ratio: float
    """MLP hidden width as a multiple of the token width."""
    stride: int
    """Pixels per token of this stage."""
    relative_context: SlotContext
    """What each block's relative encoding is built from: the stage itself under global attention,
    one window (no prefix tokens) under window attention."""


@dataclass(kw_only=True)
class HostConfig:
    """The fields and behaviour every host's config shares: image, head, dropout, position slots.

    A host is a pyramid of stages (the plain ViT has one). A subclass adds its own fields (they
    are keyword-only, so each host may change a default), calls :meth:`_check_common` first in
    ``__post_init__`` and :meth:`_resolve_stages` last, and says what its stages are in
    :meth:`stage_geometry`; everything else here is read from :attr:`stages`.
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
    head: str = bounded("cls", choices=HEADS)
    """'cls': classify from the class token; 'gap': average the last stage's patch tokens; 'seq': their
    attention-weighted mean (Compact Transformers' sequence pooling)."""
    class_token: bool | None = None
    """Prepend a class token (to the last stage); defaults to True for head='cls' and False for head='gap'."""
    drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on tokens, MLP outputs and the head input."""
    attn_drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on attention weights."""
    drop_path_rate: float = bounded(0.0, ge=0, lt=1)
    """Stochastic depth: drop rate of the last block, rising linearly from 0 over all blocks."""
    layer_scale: float | None = bounded(None, gt=0)
    """LayerScale (CaiT, DeiT III): a learned per-channel factor on each residual branch of every block
    (every encoder block of a DETR), starting at this value (DeiT III: 1e-4); None: no factor."""
    position: PositionConfig = field(default_factory=PositionConfig)
    """The four position slots, built per stage."""

    foreign_fields: ClassVar[dict[str, str]] = {}
    """Fields of a sibling host's config, each with why it does not apply here. Saved configs of
    the earlier shared ``PyramidConfig`` carry them as None, which is dropped on reading; a value
    is an error with that message."""

    def _check_common(self) -> None:
        """Check every field's type and range (normalising loaded lists and dicts), then the head."""
        check_fields(self)
        if self.class_token is None:
            self.class_token = self.head == "cls"
        if self.head == "cls" and not self.class_token:
            raise ConfigError("head='cls' needs class_token=True; use head='gap' for a model without one")

    def _resolve_stages(self) -> None:
        """Compute the stage geometry once (the config's fields are checked by now)."""
        self._stages = tuple(self.stage_geometry())

    def stage_geometry(self) -> list[StageGeometry]:
        """Every stage's geometry, computed from the fields (read it as :attr:`stages`)."""
        raise NotImplementedError(f"{type(self).__name__} does not say what its stages are")

    @property
    def stages(self) -> tuple[StageGeometry, ...]:
        """Every stage's geometry, as computed when the config was validated."""
        return self._stages

    @property
    def image_hw(self) -> tuple[int, int]:
        """The training image size as (height, width)."""
        size = self.img_size
        return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))

    @property
    def size_multiple(self) -> int:
        """Image sides the stem takes are multiples of this (its patch size; 1 for a stem that takes any size)."""
        return self.patch_size

    @property
    def distillation_tokens(self) -> int:
        """Distillation tokens (DeiT's) among the last stage's prefix tokens: none unless the host has them."""
        return 0

    @property
    def num_stages(self) -> int:
        """Number of stages S."""
        return len(self.stages)

    @property
    def stride(self) -> int:
        """Pixels per last-stage token: inputs must be a multiple of it."""
        return self.stages[-1].stride

    @property
    def embed_dims(self) -> tuple[int, ...]:
        """Token width of each stage."""
        return tuple(s.context.embed_dim for s in self.stages)

    @property
    def mlp_ratios(self) -> tuple[float, ...]:
        """MLP hidden width as a multiple of the token width, per stage."""
        return tuple(s.mlp_ratio for s in self.stages)

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of every stage for an image of size ``image_hw``; a ValueError if it does not fit."""
        h, w = image_hw
        if h % self.stride or w % self.stride:
            raise ValueError(
                f"image size {h}x{w} is not divisible by this pyramid's total stride {self.stride}; "
                f"resize the input to a multiple of {self.stride}"
            )
        return [(h // s.stride, w // s.stride) for s in self.stages]

    def stage_grid(self, stage: int, image_hw: tuple[int, int] | None = None) -> tuple[int, int]:
        """The token grid (H, W) of ``stage`` for ``image_hw`` (default: the training size)."""
        if image_hw is None:
            return self.stages[stage].context.grid
        return self.stage_grids(image_hw)[stage]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Prefix tokens (class, then register tokens) in ``stage``."""
        return self.stages[stage].context.num_prefix_tokens

    @property
    def num_prefix_tokens(self) -> int:
        """Prefix tokens of the last stage, whose tokens the head pools."""
        return self.stage_prefix_tokens(self.num_stages - 1)

    def stage_context(self, stage: int) -> SlotContext:
        """What the slot modules of ``stage`` are built from: width, heads, depth, native grid, prefix tokens."""
        return self.stages[stage].context

    def build(self) -> nn.Module:
        """The model this config describes, with freshly initialised weights (the host registered as ``arch``)."""
        widths = "; ".join(f"depth {s.context.depth}, width {s.context.embed_dim}" for s in self.stages)
        h, w = self.image_hw
        check_fits(
            f"this {self.arch} ({widths}; {h}x{w} images), its weights and one image's tokens,",
            model_bytes(self.stages) + batch_bytes(self.stages, self.in_chans, 1, self.image_hw),
            "check embed_dim, depth and img_size",
        )
        return ARCHITECTURES.get(self.arch)(self)

    @classmethod
    def drop_foreign(cls, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` without the sibling hosts' fields left at None (see :attr:`foreign_fields`)."""
        for name, why in cls.foreign_fields.items():
            if name in fields:
                if fields[name] is not None:
                    raise ConfigError(why)
                fields = {k: v for k, v in fields.items() if k != name}
        return fields

    def replace(self: _Config, **overrides: Any) -> _Config:
        """A copy with fields replaced; slot names (absolute, join, ...) update ``position``."""
        fields = {f.name for f in dataclasses.fields(self)}
        overrides = self.drop_foreign(overrides)
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
    def reading_class(cls, data: dict[str, Any]) -> type[HostConfig]:
        """The class that reads ``data`` (this one; :class:`~.pyramid.PyramidConfig` picks by ``arch``)."""
        return cls

    @classmethod
    def from_dict(cls: type[_Config], data: dict[str, Any]) -> _Config:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ConfigError(f"a {cls.__name__} is read from a mapping of its fields, got {type(data).__name__}")
        target = cls.reading_class(data)
        data = target.drop_foreign(data)
        fields = {f.name for f in dataclasses.fields(target)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ConfigError(
                f"unknown model config key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(fields))}"
            )
        config = target(**data)
        assert isinstance(config, cls)  # reading_class gives cls or a subclass
        return config


def _plain(value: Any) -> Any:
    """``value`` with every tuple turned into a list (YAML's safe dumper has no tuples)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
