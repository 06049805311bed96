"""Which preset a released file fits (:func:`guess_model`), and the presets a refusal suggests (:func:`preset_advice`).

A preset fits a file when the file fills its model strictly: the model is built on the meta device
with the released options, the file's stored grid (and window) and, for variants no preset fits
as it is, the fields its layout reads from the file's shapes. Every name a message suggests was
found this way, so following the advice loads strictly. The stored grid is always used: a file
trained at 384 px gives a 384-px model, recorded as such. Fields a layout cannot read from the
shapes (a head count) are said to be assumed, in a log line and by ``vitpos convert``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from ..config import HostConfig
from ..errors import CheckpointError, on_command_line, setting
from ..models import factory
from .files import WeightsFile
from .layout import Layout
from .load import check_arch, convert_for, released_config

__all__ = [
    "CLASSIFIER_KEYS",
    "assumed_fields",
    "guess_model",
    "guess_preset",
    "preset_advice",
    "released_model_config",
    "stored_classes",
]

LOG = logging.getLogger("vitpos.weights")

CLASSIFIER_KEYS = ("head.weight", "head.fc.weight", "classifier.fc.weight")
"""Where released files keep their classifier's weight: most; timm's newer Swin; Compact Transformers."""


def released_model_config(
    name: str | HostConfig, file: WeightsFile, layout: Layout, keep_grid: bool, overrides: dict[str, Any]
) -> HostConfig:
    """The config of ``name`` with ``overrides``, the released options and (``keep_grid``) the
    stored sizes, which win over ``img_size`` or ``window_size`` given in ``overrides``. A join given
    in ``overrides`` is kept or refused, never replaced (:func:`~.load.released_config`)."""
    cfg = factory.get_config(name, **overrides)
    check_arch(cfg.arch, layout, file.path)
    cfg = released_config(cfg, layout, file, keep_join="join" in overrides)
    stored = layout.stored_geometry(file.state, cfg) if keep_grid else {}
    return cfg.replace(**stored) if stored else cfg


def stored_classes(file: WeightsFile) -> dict[str, int]:
    """``{"num_classes": N}`` for a released file's classifier of N classes (empty without one)."""
    head = next((file.state[key] for key in CLASSIFIER_KEYS if key in file.state), None)
    return {} if head is None else {"num_classes": head.shape[0]}


def _fitting(file: WeightsFile, layout: Layout, fields: dict[str, Any]) -> list[tuple[HostConfig, str, dict[str, Any]]]:
    """The presets which, with ``fields``, the checkpoint fills exactly (built on the meta device), each as its
    model's config, its name and the fields it changes. Presets that become the same model count as one: the one
    named by the file's stored training arguments, else the one that changes fewest fields, then the one the
    file's stored geometry leaves as it is (a Swin V2 file's window names its preset)."""
    trained = layout.trained_preset(file.args, file.state)
    found: list[tuple[HostConfig, str, dict[str, Any]]] = []
    refused: list[HostConfig] = []  # models the file does not fill, each built once
    for name in factory.list_models():
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in layout.presets):
            continue
        preset = factory.get_config(name)
        if layout.archs and preset.arch not in layout.archs:
            continue
        with contextlib.suppress(ValueError, TypeError):
            cfg = released_model_config(name, file, layout, True, {**stored_classes(file), **fields})
            if cfg in refused or not layout.could_fit(cfg, file.state):
                continue
            if all(other != cfg for other, _, _ in found):
                refused.append(cfg)
                with torch.device("meta"):
                    model = factory.create_model(cfg)
                convert_for(model, file.state, layout, file.path)
                refused.pop()
            changed = {k: v for k, v in fields.items() if getattr(preset, k) != v}
            same = next((i for i, (other, _, _) in enumerate(found) if other == cfg), None)
            if same is None:
                found.append((cfg, name, changed))
            elif name == trained or (
                found[same][1] != trained
                and (len(changed), _moved(preset, file, layout))
                < (len(found[same][2]), _moved(factory.get_config(found[same][1]), file, layout))
            ):
                found[same] = (cfg, name, changed)
    return found


def _moved(preset: HostConfig, file: WeightsFile, layout: Layout) -> bool:
    """Whether the file's stored geometry changes ``preset`` (a Swin V2 file's window: the preset of another window)."""
    return any(getattr(preset, k) != v for k, v in layout.stored_geometry(file.state, preset).items())


def _found(file: WeightsFile, layout: Layout) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """The presets the file fits (as they are, else with the fields read from its shapes), and those fields."""
    fitting = _fitting(file, layout, {})
    shaped = layout.stored_shapes(file.state) if not fitting else {}
    if shaped:
        fitting = _fitting(file, layout, shaped)
    trained = layout.trained_preset(file.args, file.state)
    found = [(name, fields) for _, name, fields in fitting]
    if len(found) > 1 and trained in {name for name, _ in found}:
        found = [(name, fields) for name, fields in found if name == trained]
    return [(name, {**fields, **_stored_grid(file, layout, name, fields)}) for name, fields in found], shaped


def _stored_grid(file: WeightsFile, layout: Layout, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The stored sizes (image, window) where they differ from preset ``name``'s."""
    grid = layout.stored_geometry(file.state, factory.get_config(name, **fields))
    preset = factory.get_config(name)
    return {k: v for k, v in grid.items() if getattr(preset, k) != v}


def assumed_fields(layout: Layout, fields: dict[str, Any]) -> dict[str, str]:
    """Of ``fields``, those the layout cannot read from a file's shapes, each with the assumption made."""
    return {k: why for k, why in layout.assumed if k in fields}


def guess_model(file: WeightsFile, layout: Layout, given: Collection[str] = ()) -> tuple[str, dict[str, Any]]:
    """The preset the checkpoint fits, and the fields it needs: its stored grid where it differs from the
    preset's, and for a variant no preset fits those read from the file's keys and shapes
    (:meth:`~.layout.Layout.stored_shapes`); fields only assumed are logged, unless ``given`` by the caller."""
    found, shaped = _found(file, layout)
    where = f"checkpoint {file.path} ({layout.name} layout)"
    if len(found) == 1:
        name, fields = found[0]
        for key, why in assumed_fields(layout, fields).items():
            if key in given:
                continue
            LOG.warning(
                f"{where}: {key}={fields[key]} is assumed, not read from its shapes ({why}); give "
                f"{setting(key, 'N')} if it was trained with another"
            )
        return name, fields
    if found:
        names = ", ".join(name for name, _ in found)
        calls = "; ".join(_call(name, {**_classes(file, name), **fields}) for name, fields in found)
        raise CheckpointError(
            f"{where}: several presets fit it ({names}); build the one it was trained as: {calls}"
            + (f". {layout.ambiguity}" if layout.ambiguity else "")
        )
    if not shaped:
        raise CheckpointError(
            f"{where}: no preset fits it, and its shapes give no variant of one; name the model with the options "
            "its authors built it with (--model NAME and its widths, see `vitpos models` and docs/weights.md)"
        )
    options = ", ".join(setting(k, str(v)) for k, v in shaped.items())
    raise CheckpointError(
        f"{where}: no preset fits it, nor one with the options its shapes suggest ({options}); its shapes: "
        f"{layout.shape_summary(file.state)}. It is not a variant vitpos reads as it is"
    )


def guess_preset(file: WeightsFile, layout: Layout) -> str:
    """The preset the checkpoint fits (:func:`guess_model` also gives the fields read from its shapes)."""
    return guess_model(file, layout)[0]


def _call(name: str, fields: dict[str, Any]) -> str:
    """How the reader builds preset ``name`` with ``fields`` for a file: a command line's options or a Python call."""
    given = "".join(f" {setting(k, str(v))}" for k, v in fields.items())
    if on_command_line():
        return f"--model {name}{given}"
    return f"vitpos.create_model({name!r}, checkpoint=PATH{''.join(f', {k}={v!r}' for k, v in fields.items())})"


def preset_advice(state: dict[str, torch.Tensor], layout: Layout, source: Path | str) -> str:
    """What to build instead, for a file that does not fit the model it was given: the presets it fits (each
    tried), or "" where none does."""
    file = WeightsFile(Path(source), state)
    with contextlib.suppress(ValueError, TypeError):
        found, _ = _found(file, layout)
        calls = [_call(name, {**_classes(file, name), **fields}) for name, fields in found]
        if len(calls) == 1:
            return f"It fits a preset: {calls[0]}"
        if calls:
            return f"It fits each of these presets; build the one it was trained as: {'; '.join(calls)}"
    return ""


def _classes(file: WeightsFile, name: str) -> dict[str, int]:
    """``num_classes`` of the file's classifier where preset ``name`` has another count."""
    classes = stored_classes(file)
    return classes if classes and factory.get_config(name).num_classes != classes["num_classes"] else {}
