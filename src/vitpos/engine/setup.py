"""From layered settings (a run's saved config, a YAML file, command-line options) to the
model config, the training config and the data.

A YAML config has two sections; ``model`` is a preset name or a mapping of model fields and
slot values, optionally with ``preset:`` to start from::

    model:
      preset: thesis_vit
      absolute: sincos2d
    train:
      data: synthetic:direction
      epochs: 30

Any host works: the model fields are those of the preset's config (a plain ViT's ``depth``, a
pyramid's per-stage ``depths``); without a preset, ``arch`` picks the host (default ``vit``).
Fields the user leaves open are filled from the data: ``num_classes`` (classes, or regression
targets), ``in_chans`` and ``img_size``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import SLOT_NAMES, HostConfig
from ..data.catalog import open_data
from ..data.dataset import DataInfo, DataSplits
from ..errors import VitposError, quote, setting
from ..models.factory import config_from_dict, get_config
from ..registry import ARCHITECTURES
from ..yaml_io import read_yaml
from .config import TrainConfig

__all__ = ["RunRequest", "fit_model_to_data", "check_model_fits_data", "check_train_arguments", "model_keys"]


def model_keys() -> frozenset[str]:
    """Every field of any registered architecture's config (hosts, and the tasks' detector and segmenter)
    and every slot name a request may set (the chosen config checks its own)."""
    configs = {ARCHITECTURES.get(arch).config_class for arch in ARCHITECTURES}
    return frozenset(f.name for cls in configs for f in dataclasses.fields(cls)) | frozenset(SLOT_NAMES)


@dataclass
class RunRequest:
    """One layer of settings; :meth:`merged` stacks layers, later ones winning."""

    preset: str | None = None
    model: dict[str, Any] = field(default_factory=dict)
    """Model fields and slot values (``absolute`` ...) to override on the preset."""
    train: dict[str, Any] = field(default_factory=dict)
    """Training options."""

    def __post_init__(self) -> None:
        model = dict(self.model)
        self.model = {**(model.pop("position", None) or {}), **model}
        self.train = dict(self.train)
        valid = model_keys()
        unknown = sorted(set(self.model) - valid)
        if unknown:
            raise ValueError(f"unknown model option(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
        unknown = sorted(set(self.train) - set(TrainConfig.field_names()))
        if unknown:
            raise ValueError(
                f"unknown training option(s) {', '.join(unknown)}; valid: {', '.join(TrainConfig.field_names())}"
            )

    def merged(self, later: RunRequest) -> RunRequest:
        """This layer overridden by ``later``."""
        return RunRequest(later.preset or self.preset, {**self.model, **later.model}, {**self.train, **later.train})

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "config") -> RunRequest:
        """Parse the two-section mapping described in the module docstring."""
        if not isinstance(data, dict):
            raise VitposError(f"{source} must be a mapping with 'model' and 'train' sections, not {quote(data)}")
        unknown = sorted(map(str, set(data) - {"model", "train"}))
        if unknown:
            raise VitposError(f"{source}: unknown section(s) {', '.join(unknown)}; expected 'model' and 'train'")
        train = data.get("train") or {}
        if not isinstance(train, dict):
            raise VitposError(f"{source}: section 'train' must be a mapping of option: value, not {quote(train)}")
        model = data.get("model") or {}
        if isinstance(model, str):
            return cls(preset=model, train=dict(train))
        if not isinstance(model, dict):
            raise VitposError(
                f"{source}: 'model' must be a preset name or a mapping of model fields, not {quote(model)}"
            )
        model = dict(model)
        return cls(preset=model.pop("preset", None), model=model, train=dict(train))

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunRequest:
        """Read a YAML config file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        try:
            data = read_yaml(path, sections=("train",))
        except yaml.YAMLError as err:
            raise ValueError(f"config file {path} is not valid YAML: {err}") from None
        return cls.from_mapping(data or {}, str(path))

    def resolve(self) -> tuple[HostConfig, TrainConfig, DataSplits]:
        """Build the training config, open the data, and fit the model config to it."""
        train_cfg = TrainConfig.from_dict(self.train)
        if self.preset is None and not self.model:
            raise ValueError(
                "no model chosen: pass --model NAME (see `vitpos models`) or a config with a model section"
            )
        base = get_config(self.preset) if self.preset else None
        patch = self.model.get(
            "patch_size", base.patch_size if base else _default(self.model.get("arch", "vit"), "patch_size")
        )
        data = open_data(train_cfg.data, patch_size=patch)
        model_cfg = fit_model_to_data(base, data, overrides=self.model)
        return model_cfg, train_cfg, data


def _default(arch: str, name: str) -> Any:
    """The default of field ``name`` in the config of host ``arch``."""
    return next(f.default for f in dataclasses.fields(ARCHITECTURES.get(arch).config_class) if f.name == name)


def fit_model_to_data(base: HostConfig | None, data: DataSplits, overrides: dict[str, Any] | None = None) -> HostConfig:
    """``base`` (None: the config of host ``overrides['arch']``, default ``vit``) with ``overrides``
    applied and the fields they leave open taken from ``data``.

    ``num_classes`` and ``in_chans`` follow the data; ``img_size`` follows it where the data
    has a native size. An override that contradicts the data is an error.
    """
    overrides = dict(overrides or {})
    info = data.info
    facts: dict[str, Any] = {"num_classes": info.num_outputs, "in_chans": info.channels}
    if data.image_size is not None:
        h, w = data.image_size
        facts["img_size"] = h if h == w else (h, w)
    filled = {k: v for k, v in facts.items() if k not in overrides}
    try:
        if base is None:
            fields = {**overrides, **filled}
            slots = {k: fields.pop(k) for k in SLOT_NAMES if k in fields}
            cfg = config_from_dict({**fields, "position": slots})
        else:
            cfg = base.replace(**overrides, **filled)
    except TypeError as err:
        raise ValueError(str(err)) from None
    except ValueError as err:
        if "img_size" in filled and str(err).startswith(("img_size", "image size")):  # the data's size, not a width
            raise ValueError(
                f"{err}; the data's images are {data.image_size}: pass --img-size to resize them"
            ) from None
        raise
    check_model_fits_data(cfg, info)
    return cfg


def check_train_arguments(model_cfg: Any, cfg: Any, data: Any) -> None:
    """Refuse arguments of :func:`~vitpos.engine.train` of the wrong kind, saying how to build the right one."""
    if not isinstance(model_cfg, HostConfig):
        raise VitposError(
            f"train: model_cfg must be a model config, got {quote(model_cfg)} ({type(model_cfg).__name__}); "
            "build one with vitpos.get_config(name, **fields), or use RunRequest(name, model, train).resolve()"
        )
    if not isinstance(cfg, TrainConfig):
        raise VitposError(
            f"train: cfg must be a TrainConfig, got {type(cfg).__name__}; build one with TrainConfig(...)"
        )
    if data is not None and not isinstance(data, DataSplits):
        raise VitposError(f"train: data must be DataSplits (open_data(spec)) or None, got {type(data).__name__}")


def check_model_fits_data(
    cfg: HostConfig, info: DataInfo, trained_on: dict[str, Any] | None = None, checkpoint: str | Path | None = None
) -> None:
    """Raise if the model's outputs or input channels do not match the data.

    ``trained_on`` is the data record of a checkpoint (``Checkpoint.data``): its task
    (classification or regression) must be the data's too, since a head of the right width
    can still have been trained for the other kind of output. ``checkpoint`` is the trained
    model being evaluated: its head is fixed, so a mismatch names what evaluates it instead.
    """
    trained_on = trained_on or {}
    trained_task = trained_on.get("task")
    if trained_task is not None and trained_task != info.task:
        raise VitposError(
            f"the model was trained for {trained_task} on {trained_on.get('spec')}, but {info.spec} is a {info.task} "
            f"task; evaluate it on {trained_task} data"
        )
    if cfg.num_classes != info.num_outputs:
        unit = "classes" if info.task == "classification" else "regression targets"
        fix = (
            f"set {setting('num_classes', str(info.num_outputs))}"
            if checkpoint is None
            else f"evaluate checkpoint {checkpoint} on data with {cfg.num_classes} {unit} (without --data: the data it "
            f"was trained on), or fine-tune it for {info.spec} first (vitpos train --init {checkpoint} --model NAME "
            f"--data {info.spec} gives it a new head) and evaluate that run"
        )
        raise VitposError(
            f"the model has num_classes={cfg.num_classes} but {info.spec} has {info.num_outputs} {unit}; " + fix
        )
    if cfg.in_chans != info.channels:
        raise ValueError(f"the model takes in_chans={cfg.in_chans} but {info.spec} has {info.channels}-channel images")
