"""Options shared by the analysis commands: which model to build, on which inputs, and where to write."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import SLOT_NAMES
from ..models.factory import create_model

__all__ = ["add_model_arguments", "build_model", "add_input_arguments", "sample_images", "add_output_argument"]


def add_model_arguments(p: argparse.ArgumentParser, default_model: str = "vit_lite_7_4") -> None:
    """--model, one flag per slot, --img-size, --depth and --seed."""
    g = p.add_argument_group("model")
    g.add_argument("--model", default=default_model, help=f"preset name (default {default_model}); see 'vitpos models'")
    for slot in SLOT_NAMES:
        g.add_argument(f"--{slot}", metavar="SPEC", help=f"override the {slot} slot, e.g. --absolute sincos2d")
    g.add_argument("--img-size", type=int, help="training image size (sets the native grid)")
    g.add_argument("--depth", type=int, help="number of encoder blocks")
    g.add_argument("--head", choices=("cls", "gap"), help="class token or global average pooling")
    g.add_argument("--seed", type=int, default=0, help="seed for initialisation and inputs")


def build_model(args: argparse.Namespace) -> nn.Module:
    """The model the options describe, freshly initialised with ``--seed``, in eval mode."""
    overrides: dict[str, Any] = {s: getattr(args, s) for s in SLOT_NAMES if getattr(args, s)}
    for name in ("img_size", "depth", "head"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    torch.manual_seed(args.seed)
    return create_model(args.model, **overrides).eval()


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """--images: how many inputs to run the model on."""
    p.add_argument("--images", type=int, default=16, help="number of random input images (default 16)")


def sample_images(model: nn.Module, args: argparse.Namespace) -> torch.Tensor:
    """``--images`` standard-normal images at the model's native size, seeded by ``--seed``."""
    if args.images < 1:
        raise ValueError(f"--images must be at least 1, got {args.images}")
    generator = torch.Generator().manual_seed(args.seed)
    h, w = model.cfg.image_hw
    return torch.randn(args.images, model.cfg.in_chans, h, w, generator=generator)


def add_output_argument(p: argparse.ArgumentParser, command: str) -> None:
    """--out: the folder for figures and JSON."""
    p.add_argument("--out", type=Path, default=Path("runs") / command, help=f"output folder (default runs/{command})")
