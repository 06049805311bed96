"""Serialisable configuration dataclasses: one field per position slot, and the model."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import ConfigError
from .grid import patch_grid
from .registry import ABSOLUTE, CONDITIONAL, JOIN, RELATIVE, Registry
from .spec import SlotSpec
from .validation import bounded, check_fields

__all__ = ["PositionConfig", "HostConfig", "ModelConfig", "SLOT_NAMES"]

SLOT_NAMES = ("absolute", "join", "conditional", "relative")
_Config = TypeVar("_Config", bound="HostConfig")
_SLOT_REGISTRIES: dict[str, Registry] = {
    "absolute": ABSOLUTE,
    "join": JOIN,
    "conditional": CONDITIONAL,
    "relative": RELATIVE,
}


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
            entry = _SLOT_REGISTRIES[slot].get(spec.name)
            entry.validate(spec)
            setattr(self, slot, str(spec))
        for slot in SLOT_NAMES:
            self.entry(slot).check_combination(self)

    def spec(self, slot: str) -> SlotSpec:
        """The parsed spec of ``slot``."""
        return SlotSpec.parse(getattr(self, slot))

    def entry(self, slot: str) -> Any:
        """The registered class that implements the value of ``slot``."""
        return _SLOT_REGISTRIES[slot].get(self.spec(slot).name)

    def to_dict(self) -> dict[str, str]:
        """Plain dict, for YAML/JSON."""
        return dataclasses.asdict(self)


class HostConfig:
    """Behaviour shared by the configs of every host: image size, head, slot overrides, dicts.

    Subclasses are dataclasses with at least ``img_size``, ``num_classes``, ``head``,
    ``class_token`` and ``position`` fields, their allowed values declared with
    :func:`~vitpos.validation.bounded`; they call :meth:`_check_common` in ``__post_init__``.
    """

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

    def replace(self: _Config, **overrides: Any) -> _Config:
        """A copy with fields replaced; slot names (absolute, join, ...) update ``position``."""
        fields = {f.name for f in dataclasses.fields(self)}
        slots = {k: overrides.pop(k) for k in list(overrides) if k in SLOT_NAMES}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            valid = ", ".join(sorted(fields | set(SLOT_NAMES)))
            raise TypeError(f"unknown model option(s) {', '.join(unknown)}; valid options: {valid}")
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
            raise ConfigError(f"unknown model config key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(fields))}")
        return cls(**data)


def _plain(value: Any) -> Any:
    """``value`` with every tuple turned into a list (YAML's safe dumper has no tuples)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass
class ModelConfig(HostConfig):
    """Everything needed to build a plain ViT; presets are instances of this class."""

    arch: str = "vit"
    """Host architecture (registered in ``vitpos.registry.ARCHITECTURES``)."""
    img_size: int | tuple[int, int] = bounded(224, ge=1)
    """Training image size; sets the native grid of learned tables."""
    patch_size: int = bounded(16, ge=1)
    """Side of the square, non-overlapping patches, in pixels."""
    in_chans: int = bounded(3, ge=1)
    """Input image channels."""
    num_classes: int = bounded(1000, ge=0)
    """Output classes (or regression targets); 0 gives features only."""
    embed_dim: int = bounded(192, ge=1)
    """Token width D."""
    depth: int = bounded(12, ge=1)
    """Number of encoder blocks."""
    num_heads: int = bounded(3, ge=1)
    """Attention heads per block."""
    mlp_ratio: float = bounded(4.0, gt=0)
    """MLP hidden width as a multiple of the token width."""
    qkv_bias: bool = True
    """Biases on the query, key and value projections."""
    head: str = bounded("cls", choices=("cls", "gap"))
    """'cls': classify from the class token; 'gap': average the patch tokens."""
    class_token: bool | None = None
    """Prepend a class token; defaults to True for head='cls' and False for head='gap'."""
    reg_tokens: int = bounded(0, ge=0)
    """Extra learned prefix tokens (registers) after the class token."""
    drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on tokens, MLP outputs and the head input."""
    attn_drop_rate: float = bounded(0.0, ge=0, lt=1)
    """Dropout on attention weights."""
    drop_path_rate: float = bounded(0.0, ge=0, lt=1)
    """Stochastic depth: drop rate of the last block, rising linearly from 0."""
    pad_to_patch: bool = False
    """Zero-pad inputs whose size is not a multiple of the patch size instead of raising."""
    position: PositionConfig = field(default_factory=PositionConfig)

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
        h, w = self.image_hw
        p = self.patch_size
        return (-(-h // p), -(-w // p))

    @property
    def num_prefix_tokens(self) -> int:
        """Class token plus registers."""
        return int(bool(self.class_token)) + self.reg_tokens

    @property
    def num_stages(self) -> int:
        """The plain ViT is a pyramid of one stage."""
        return 1

    @property
    def stride(self) -> int:
        """Pixels per token: the patch size."""
        return self.patch_size

    @property
    def embed_dims(self) -> tuple[int, ...]:
        """Token width of each stage: ``(embed_dim,)``."""
        return (self.embed_dim,)

    def stage_grid(self, stage: int, image_hw: tuple[int, int] | None = None) -> tuple[int, int]:
        """The token grid (H, W) of ``stage`` (only 0) for ``image_hw`` (default: the training size)."""
        return self.stage_grids(image_hw or self.image_hw)[stage]

    def stage_grids(self, image_hw: tuple[int, int]) -> list[tuple[int, int]]:
        """The token grid of the one stage for an image of size ``image_hw``; raises if it does not fit."""
        return [patch_grid(image_hw, self.patch_size, pad=self.pad_to_patch)]

    def stage_prefix_tokens(self, stage: int) -> int:
        """Prefix tokens of ``stage`` (only 0): class token plus registers."""
        return self.num_prefix_tokens
