"""The papers' training recipes, stated once: ``vitpos train --recipe deit`` (options given still override).

Every classification number in CPVT, iRPE and LaPE comes from DeiT's recipe on ImageNet-1k, Swin's
for the Swin rows, and LaPE's Table 7 for its other hosts. A recipe sets training options and the
model's stochastic depth; each value cites the table it is read from:

* ``deit`` — DeiT (Touvron et al. 2021) Table 9, reproduced as CPVT Table 10 ("DeiT" column) and
  restated in iRPE §4.1 and LaPE Table 7: AdamW, lr 5e-4 x batch/512 (CPVT §4.1 formula), weight
  decay 0.05, cosine to min_lr 1e-5 (iRPE §4.1, LaPE Table 7), 5 warm-up epochs, 300 epochs, batch
  1024, label smoothing 0.1, stochastic depth 0.1, no dropout, no gradient clipping, RandAugment
  9/0.5 (timm's ``rand-m9-mstd0.5-inc1``), mixup 0.8, cutmix 1.0 (switch probability 0.5), random
  erasing 0.25, repeated augmentation (x3), no EMA (Table 9); bicubic resampling and the 0.875
  evaluation crop are those of DeiT's released code (its Table 9 does not list them).
* ``swin`` — Swin (Liu et al. 2021) §A2.1: as ``deit`` but lr 1e-3 x batch/1024, 20 warm-up epochs,
  stochastic depth 0.2 (Swin-T), no repeated augmentation and no EMA; min_lr 5e-6 from LaPE Table 7.
  Gradient clipping at norm 5 is the released code's (the paper does not state it).
* ``t2t``, ``ceit`` — LaPE Table 7's ImageNet rows for T2T-ViT and CeiT (lr, schedule, weight decay,
  batch, epochs, warm-up; T2T's 300 + 10 cool-down epochs); the rest as ``deit``, on whose code
  both were trained.
* ``cct_cifar10``, ``cct_cifar100`` — LaPE Table 7's CIFAR rows for ViT-Lite, CVT and CCT: lr 5.5e-4
  (CIFAR-10) or 6e-4 (CIFAR-100), cosine to 1e-5, weight decay 0.06, batch 128, 300 + 10 cool-down
  epochs, 10 warm-up epochs. LaPE §D names SGD for these models yet says its settings are the
  original papers', and CCT (Hassani et al. 2021) trains them with AdamW, which vitpos uses. Table
  7 states nothing else; the other options keep vitpos's defaults.

Differences from the released DeiT code that remain: warm-up starts from 0 rather than 1e-6, and
the cosine runs from the end of warm-up (timm runs it from step 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data.dataset import DataSplits
from ..errors import ConfigError

__all__ = ["Recipe", "RECIPES", "get_recipe", "check_recipe_fits", "blame_recipe"]


@dataclass(frozen=True)
class Recipe:
    """A named set of training options (and model options: stochastic depth) with its source."""

    name: str
    source: str
    """The paper and table every value is read from."""
    train: Mapping[str, Any]
    model: Mapping[str, Any] = field(default_factory=dict)


_DEIT_TRAIN: dict[str, Any] = {
    "epochs": 300,
    "batch_size": 1024,
    "lr": 5e-4,
    "lr_batch": 512,
    "min_lr": 1e-5,
    "warmup_epochs": 5,
    "weight_decay": 0.05,
    "betas": (0.9, 0.999),
    "grad_clip": 0.0,
    "ema_decay": 0.0,
    "label_smoothing": 0.1,
    "mixup": 0.8,
    "cutmix": 1.0,
    "mixup_switch": 0.5,
    "randaugment": "rand-m9-mstd0.5-inc1",
    "random_erasing": 0.25,
    "repeated_aug": 3,
    "crop_scale": 0.08,
    "hflip": 0.5,
    "interpolation": "bicubic",
    "eval_crop": 0.875,
}

_CCT_CIFAR: dict[str, Any] = {
    "epochs": 310,
    "cooldown_epochs": 10,
    "batch_size": 128,
    "min_lr": 1e-5,
    "warmup_epochs": 10,
    "weight_decay": 0.06,
}

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("deit", "DeiT Table 9 (= CPVT Table 10), iRPE §4.1, LaPE Table 7", _DEIT_TRAIN, {"drop_path_rate": 0.1}),
        Recipe(
            "swin",
            "Swin §A2.1; min_lr: LaPE Table 7; grad_clip: released code",
            {**_DEIT_TRAIN, "lr": 1e-3, "lr_batch": 1024, "min_lr": 5e-6, "warmup_epochs": 20, "repeated_aug": 1}
            | {"grad_clip": 5.0},
            {"drop_path_rate": 0.2},
        ),
        Recipe(
            "t2t",
            "LaPE Table 7 (T2T-ViT row); other options: DeiT Table 9",
            {**_DEIT_TRAIN, "lr": 1e-3, "lr_batch": None, "weight_decay": 0.03, "epochs": 310}
            | {"cooldown_epochs": 10, "warmup_epochs": 10},
            {"drop_path_rate": 0.1},
        ),
        Recipe(
            "ceit",
            "LaPE Table 7 (CeiT row); other options: DeiT Table 9",
            dict(_DEIT_TRAIN),
            {"drop_path_rate": 0.1},
        ),
        Recipe("cct_cifar10", "LaPE Table 7 (CIFAR-10 rows)", {**_CCT_CIFAR, "lr": 5.5e-4}),
        Recipe("cct_cifar100", "LaPE Table 7 (CIFAR-100 rows)", {**_CCT_CIFAR, "lr": 6e-4}),
    )
}
"""Every recipe by name."""


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``; an unknown name lists the valid ones."""
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; valid recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


_OFF = {
    "crop_scale": "none",
    "hflip": "0",
    "cutmix": "0",
    "randaugment": "none",
    "random_erasing": "0",
    "mixup": "0",
    "label_smoothing": "0",
    "repeated_aug": "1",
}
"""The settings a recipe turns on that some data cannot take, and the option value that turns each off."""


def check_recipe_fits(name: str, origins: Mapping[str, str], data: DataSplits) -> None:
    """Refuse recipe ``name`` where settings it made (``origins[key] == "recipe NAME"``) do not fit ``data``,
    naming the recipe, the settings and how to turn them off or pick other data."""
    info = data.info
    ours = {k: v for k, v in get_recipe(name).train.items() if origins.get(k) == f"recipe {name}" and k in _OFF}
    problems: list[tuple[list[str], str]] = []
    if info.position_sensitive:
        moving = [k for k in ("crop_scale", "hflip", "cutmix", "randaugment", "random_erasing") if ours.get(k)]
        problems.append((moving, "move or hide things within the image and would change its labels"))
    if info.task != "classification":
        problems.append(([k for k in ("mixup", "cutmix", "label_smoothing") if ours.get(k)], "need a classifier"))
    if ours.get("repeated_aug", 1) > 1 and not data.train.per_image:
        problems.append((["repeated_aug"], "needs single images, and it draws whole batches"))
    problems = [(keys, why) for keys, why in problems if keys]
    if not problems:
        return
    bad = list(dict.fromkeys(k for keys, _ in problems for k in keys))
    reasons = "; ".join(f"{', '.join(f'{k}={ours[k]}' for k in keys)} {why}" for keys, why in problems)
    off = " ".join(f"--{k.replace('_', '-')} {_OFF[k]}" for k in bad)
    raise ConfigError(
        f"--recipe {name} sets what {info.spec} ({info.task}) cannot take: {reasons}. The recipe is for "
        f"photographs (--data folder:PATH, wds:PATTERN, cifar10:PATH); to keep it on this data, turn those off: {off}"
    )


def blame_recipe(err: ValueError, name: str, origins: Mapping[str, str]) -> ValueError:
    """``err`` with a note naming recipe ``name`` where its message names a setting the recipe made; else ``err``."""
    blamed = [
        key for key, origin in origins.items() if origin == f"recipe {name}" and re.search(rf"\b{key}\b", str(err))
    ]
    if not blamed:
        return err
    return ConfigError(
        f"{err} ({', '.join(blamed)}: set by --recipe {name}, from {get_recipe(name).source}; "
        "a value given on the command line overrides the recipe's)"
    )
