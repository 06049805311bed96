"""Options shared by the analysis commands: which model to build or load, on which inputs, and where to write."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import SLOT_NAMES
from ..data.spec import open_data
from ..data.transforms import normalize, to_float
from ..engine.checkpoint import load_model
from ..models.factory import create_model
from ..spec import non_negative_int, positive_int
from .options import option_type

__all__ = ["add_model_arguments", "build_model", "add_input_arguments", "sample_images", "add_output_argument"]

_MODEL_OPTIONS = ("img_size", "depth", "head")
_SLOT_EXAMPLES = {"absolute": "sincos2d", "join": "lape", "conditional": "peg@0", "relative": "irpe:product:ctx:k"}


def add_model_arguments(p: argparse.ArgumentParser, default_model: str = "thesis_vit") -> None:
    """--checkpoint, or --model with one flag per slot, --img-size, --depth, --head; and --seed."""
    g = p.add_argument_group("model")
    g.add_argument("--checkpoint", metavar="RUN", help="analyse a trained model: a run folder of `vitpos train` or a checkpoint")
    g.add_argument("--model", default=default_model, help=f"preset to build fresh (default {default_model}); see 'vitpos models'")
    for slot in SLOT_NAMES:
        g.add_argument(f"--{slot}", metavar="SPEC", help=f"override the {slot} slot, e.g. --{slot} {_SLOT_EXAMPLES[slot]}")
    g.add_argument("--img-size", type=option_type(positive_int), help="training image size (sets the native grid)")
    g.add_argument("--depth", type=option_type(positive_int), help="number of encoder blocks")
    g.add_argument("--head", choices=("cls", "gap"), help="class token or global average pooling")
    g.add_argument("--seed", type=option_type(non_negative_int), default=0, help="seed for initialisation and inputs")


def build_model(args: argparse.Namespace) -> nn.Module:
    """The trained model of ``--checkpoint``, or a fresh one from ``--model`` and overrides; eval mode."""
    overrides: dict[str, Any] = {s: getattr(args, s) for s in SLOT_NAMES if getattr(args, s)}
    overrides |= {n: getattr(args, n) for n in _MODEL_OPTIONS if getattr(args, n) is not None}
    if args.checkpoint:
        if overrides:
            raise ValueError(f"--checkpoint fixes the model; drop {', '.join('--' + k.replace('_', '-') for k in overrides)}")
        return load_model(args.checkpoint)[0]
    torch.manual_seed(args.seed)
    return create_model(args.model, **overrides).eval()


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """--images and --data: which inputs to run the model on."""
    p.add_argument("--images", type=option_type(positive_int), default=16, help="number of input images (default 16)")
    p.add_argument("--data", metavar="SPEC", help="take the images from this data set's test split, e.g. "
                   "synthetic:direction (default: standard-normal noise)")


def sample_images(model: nn.Module, args: argparse.Namespace) -> torch.Tensor:
    """``--images`` inputs at the model's native size: from ``--data``, or standard-normal noise seeded by ``--seed``."""
    if args.images < 1:
        raise ValueError(f"--images must be at least 1, got {args.images}")
    h, w = model.cfg.image_hw
    if args.data:
        test = open_data(args.data, patch_size=model.cfg.patch_size).test.at_size((h, w))
        count = min(args.images, len(test))
        images, _ = test[torch.arange(count)]
        return normalize(to_float(images), test.info.mean, test.info.std)
    generator = torch.Generator().manual_seed(args.seed)
    return torch.randn(args.images, model.cfg.in_chans, h, w, generator=generator)


def add_output_argument(p: argparse.ArgumentParser, command: str) -> None:
    """--out: the folder for figures and JSON."""
    p.add_argument("--out", type=Path, default=Path("runs") / command, help=f"output folder (default runs/{command})")
