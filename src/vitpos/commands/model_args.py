"""Options shared by the analysis commands: which model to build or load, on which inputs, and where to write."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import weights
from ..analysis.stages import as_host, stage_count
from ..config import HEADS, SLOT_NAMES
from ..data.catalog import open_data
from ..data.padded import PaddedTargets
from ..data.transforms import normalize, resize, to_float
from ..errors import ConfigError
from ..models.factory import create_model, get_config
from ..models.host import host_of
from ..ownership import clear_earlier
from ..spec import non_negative_int, positive_int
from ..weights import load_model
from .options import option_type

__all__ = [
    "add_model_arguments",
    "build_model",
    "build_host",
    "add_input_arguments",
    "sample_images",
    "add_output_argument",
    "claim_output",
    "add_stage_argument",
    "figure_path",
    "model_label",
]

_MODEL_OPTIONS = (
    "img_size",
    "depth",
    "head",
    "patch_size",
    "embed_dims",
    "depths",
    "num_heads",
    "window_size",
    "sr_ratios",
)
_SLOT_EXAMPLES = {"absolute": "sincos2d", "join": "lape", "conditional": "peg@0", "relative": "irpe:product:ctx:k"}


def add_model_arguments(p: argparse.ArgumentParser, default_model: str = "thesis_vit") -> None:
    """--checkpoint, or --model with one flag per slot, --img-size, --depth, --head; and --seed."""
    g = p.add_argument_group("model")
    g.add_argument(
        "--checkpoint",
        metavar="RUN",
        help="a trained model: a run folder of `vitpos train`, a checkpoint folder, a released file, its URL, or a "
        "preset with released weights",
    )
    g.add_argument(
        "--model", default=default_model, help=f"preset to build fresh (default {default_model}); see 'vitpos models'"
    )
    g.add_argument(
        "--pretrained",
        action="store_true",
        help="load the preset's released weights (`vitpos models --pretrained`), downloaded once into the cache",
    )
    for slot in SLOT_NAMES:
        g.add_argument(
            f"--{slot}", metavar="SPEC", help=f"override the {slot} slot, e.g. --{slot} {_SLOT_EXAMPLES[slot]}"
        )
    g.add_argument("--img-size", type=option_type(positive_int), help="training image size (sets the native grid)")
    g.add_argument("--depth", type=option_type(positive_int), help="number of encoder blocks")
    g.add_argument("--head", choices=HEADS, help="class token, global average pooling or sequence pooling")
    g.add_argument(
        "--patch-size", type=option_type(positive_int), help="pixels per patch (pyramids: of the first stage)"
    )
    g.add_argument("--embed-dims", type=_int_list, metavar="N,N,..", help="pyramid hosts: token width of each stage")
    g.add_argument("--depths", type=_int_list, metavar="N,N,..", help="pyramid hosts: blocks per stage, e.g. 1,1,1,1")
    g.add_argument(
        "--num-heads", type=_int_or_list, metavar="N[,N,..]", help="attention heads (pyramid hosts: per stage)"
    )
    g.add_argument("--window-size", type=option_type(positive_int), help="Swin hosts: window side in tokens")
    g.add_argument("--sr-ratios", type=_int_list, metavar="N,N,..", help="PVT hosts: spatial-reduction ratio per stage")
    g.add_argument("--seed", type=option_type(non_negative_int), default=0, help="seed for initialisation and inputs")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated integers, e.g. 1,1,1,1") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least 1")
    return values


def _int_or_list(text: str) -> int | tuple[int, ...]:
    values = _int_list(text)
    return values[0] if len(values) == 1 and "," not in text else values


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_model(args: argparse.Namespace) -> nn.Module:
    """The trained model of ``--checkpoint``, or a fresh one from ``--model`` and overrides; eval mode."""
    overrides: dict[str, Any] = {s: getattr(args, s) for s in SLOT_NAMES if getattr(args, s)}
    overrides |= {n: getattr(args, n) for n in _MODEL_OPTIONS if getattr(args, n, None) is not None}
    if args.checkpoint:
        if overrides or args.pretrained:
            given = [*(_flag(k) for k in overrides), *(["--pretrained"] if args.pretrained else [])]
            raise ValueError(f"--checkpoint fixes the model; drop {', '.join(given)}")
        return load_model(args.checkpoint)[0]
    base = get_config(args.model)
    fields = {f.name for f in dataclasses.fields(base)}
    foreign = [name for name in overrides if name not in SLOT_NAMES and name not in fields]
    if foreign:
        own = [_flag(n) for n in _MODEL_OPTIONS if n in fields]
        raise ConfigError(
            f"{', '.join(map(_flag, foreign))} does not apply to --model {args.model} (a {base.arch} host); "
            f"its options here: {', '.join(own)}"
        )
    torch.manual_seed(args.seed)
    if args.pretrained:
        return weights.create_model(args.model, pretrained=True, **overrides).eval()
    return create_model(base, **overrides).eval()


def build_host(args: argparse.Namespace) -> nn.Module:
    """The host :func:`build_model` holds, for the analyses that read stages: the model itself, or the
    pyramid host a Semantic FPN is built on (said in one line)."""
    model = build_model(args)
    host = host_of(model)
    assert isinstance(host, nn.Module), "a host is a torch module"
    if host is not model:
        print(f"analysing the {host.cfg.arch} host of this {type(model).__name__} (its backbone: stages and tables)")
    return host


def model_label(args: argparse.Namespace) -> str:
    """The analysed model in a few words, for figure titles: the run, or the preset and its overrides."""
    if args.checkpoint:
        return f"run {Path(args.checkpoint).name or args.checkpoint}"
    if args.pretrained:
        return f"{args.model} (released weights)"
    overrides = [f"{s}={getattr(args, s)}" for s in SLOT_NAMES if getattr(args, s)]
    overrides += [f"{n}={getattr(args, n)}" for n in _MODEL_OPTIONS if getattr(args, n, None) is not None]
    return args.model + (f" ({', '.join(overrides)})" if overrides else "")


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """--images and --data: which inputs to run the model on."""
    p.add_argument("--images", type=option_type(positive_int), default=16, help="number of input images (default 16)")
    p.add_argument(
        "--data",
        metavar="SPEC",
        help="take the images from this data set's test split, e.g. "
        "synthetic:direction (default: standard-normal noise)",
    )


def sample_images(model: nn.Module, args: argparse.Namespace) -> torch.Tensor:
    """``--images`` inputs at the model's native size: from ``--data`` (images of varied sizes, as the dense
    tasks draw them, resized to it), or standard-normal noise seeded by ``--seed``."""
    if args.images < 1:
        raise ValueError(f"--images must be at least 1, got {args.images}")
    cfg = as_host(model).cfg
    h, w = cfg.image_hw
    if args.data:
        test = open_data(args.data, patch_size=cfg.patch_size).test.at_size((h, w))
        count = min(args.images, len(test))
        images, targets = test[torch.arange(count)]
        if isinstance(targets, PaddedTargets):  # each image's own region, at the model's size
            valid = zip(images, targets.valid_sizes.tolist(), strict=True)
            images = torch.cat([resize(image[None, :, :vh, :vw], (h, w)) for image, (vh, vw) in valid])
        return normalize(to_float(images), test.info.mean, test.info.std)
    generator = torch.Generator().manual_seed(args.seed)
    return torch.randn(args.images, cfg.in_chans, h, w, generator=generator)


def _stage(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"stage {text!r} must be a stage number (0 = first, -1 = last) or 'all'"
        ) from None


def add_stage_argument(p: argparse.ArgumentParser, default: str, what: str) -> None:
    """--stage: which stage of a pyramid host to analyse (a number, -1 = the last, or ``all``)."""
    p.add_argument(
        "--stage",
        type=_stage,
        default=_stage(default),
        metavar="S|all",
        help=f"the stage whose {what} to analyse: 0 = first, -1 = last (the plain ViT's only one), "
        f"or all (default {default})",
    )


def figure_path(out: Path, stem: str, model: nn.Module, stage: int) -> Path:
    """``out/<stem>.png``, or ``out/<stem>_stage<S>.png`` for a host of several stages."""
    return out / (f"{stem}.png" if stage_count(model) == 1 else f"{stem}_stage{stage}.png")


def add_output_argument(p: argparse.ArgumentParser, command: str) -> None:
    """--out: the folder for figures and JSON; --force: replace the command's earlier results there."""
    p.add_argument("--out", type=Path, default=Path("runs") / command, help=f"output folder (default runs/{command})")
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace the results of an earlier vitpos {command} in the output folder (its own files only)",
    )


def claim_output(args: argparse.Namespace) -> Path:
    """``--out``, before the results are written: holding this command's earlier results, refused, or with
    ``--force`` cleared of them (of nothing else); a file there it did not write is never replaced."""
    clear_earlier(args.out, args.command, args.force)
    return args.out
