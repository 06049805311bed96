"""``vitpos convert``: turn a released checkpoint into a vitpos checkpoint folder.

Reads the released layouts listed below (``.pth`` through ``torch.load(weights_only=True)``,
or ``.safetensors``) and vitpos's own files, selects the released code's options (and those a
LaPE training checkpoint's stored arguments name: its first releases, --pe_joining, normalise
the same pe in every layer, its current code chains the norms), loads strictly and writes
DST/model.safetensors and DST/config.yaml. Without --model the preset whose parameters match
the checkpoint is used at the image size it was trained at (a 384-px file gives a 384-px model),
or, for a released variant no preset matches (CCT-14/7x2, T2T-ViT_t-14), the preset of its family
with the stem, depth and widths read from the file's shapes and the head count assumed (64
channels a head; the shapes do not show it: T2T-ViT-14-resnext needs --num-heads 32). DeiT III
and RoPE-ViT files load by shape too (a DeiT III file and a RoPE-Axial file with a table look the
same: name the model). A
training checkpoint holding both ``state_dict`` and ``state_dict_ema`` (timm's and T2T-ViT's
train scripts) gives its EMA weights, as T2T-ViT's evaluation does; --entry state_dict picks
the others.
SRC may be a URL or a preset with released weights (``vitpos convert deit_tiny_patch16_224 DST``;
``--pretrained`` reads SRC as a preset's name only): the file is downloaded once into the weights cache
and verified.
Then: ``vitpos eval --checkpoint DST --data SPEC`` or ``vitpos train --init DST ...``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ..analysis.stages import as_host
from ..config import HostConfig
from ..files import check_destination
from ..ownership import check_outputs
from ..progress import progress_bar
from ..weights import create_model, detect_layout, read_weights, write_checkpoint
from ..weights.data_config import DataConfig
from ..weights.export import released_data_config
from ..weights.files import WeightsFile
from ..weights.guess import assumed_fields, guess_model, stored_classes
from ..weights.load import LAYOUTS, NATIVE, layout_of
from ..weights.pretrained import fetch_pretrained, names_release
from ..weights.resize import RESIZES
from ..weights.run_folder import CONFIG_FILE, MODEL_FILE, read_saved_model, saved_config
from .options import add_model_options, given_options


def run(args: argparse.Namespace) -> int:
    check_destination(args.dst, folder=True, force=True)  # a file, or a place that takes no files
    check_outputs((Path(args.dst) / MODEL_FILE, Path(args.dst) / CONFIG_FILE), "convert", args.force)
    name = args.model or (args.src if args.pretrained or names_release(args.src) else None)
    if args.pretrained:  # SRC names a preset, even where a file of that name exists
        args.src = str(fetch_pretrained(args.src))
    overrides = given_options(args, args.option_names)
    file = read_weights(args.src, args.entry)
    if name is None and saved_config(file.metadata, file.path) is None:  # a released file: the preset it fits
        name, fields = guess_model(file, layout_of(file), given=overrides)
        assumed = assumed_fields(layout_of(file), fields)
        read = ", ".join(f"{k}={v}" for k, v in fields.items() if k not in assumed and k not in overrides)
        guessed = "; ".join(f"{k}={fields[k]} assumed ({why}; give --{k.replace('_', '-')} otherwise)"
                            for k, why in assumed.items() if k not in overrides)  # fmt: skip
        overrides = {**stored_classes(file), **fields, **overrides}  # what the preset was found with
        shaped = f" with {read} (read from the file)" if read else ""
        print(f"{args.src} fits preset {name}{shaped}{'; ' + guessed if guessed else ''} (name another with --model)")
    with progress_bar(2, "convert (load, write)") as bar:
        model = create_model(
            name, checkpoint=args.src, keep_grid=args.keep_grid, entry=args.entry, resize=args.resize, **overrides
        )
        bar.update()
        layout = detect_layout(file.state, args.src).name
        data_config = _data_config(file, args.src, as_host(model).cfg)
        write_checkpoint(model, args.dst, data_config, source=str(args.src), layout=layout)
        bar.update()
    params = sum(p.numel() for p in model.parameters())
    taken = f"; weights from its entry {file.entry!r}" if file.entry else ""
    print(f"{args.src} ({layout} layout) -> {args.dst}: {as_host(model).cfg.arch} model, {params:,} parameters{taken}")
    return 0


def _data_config(file: WeightsFile, src: str, cfg: HostConfig) -> DataConfig:
    """A vitpos file's own data config, or the released models' preprocessing, at the converted model's
    input size (class names kept where the class count is)."""
    native = saved_config(file.metadata, file.path) is not None
    base = read_saved_model(src).data_config if native else released_data_config(cfg)
    names = base.label_names if len(base.label_names) == cfg.num_classes else ()
    return replace(base, input_size=(cfg.in_chans, *cfg.image_hw), label_names=names)


def released_layouts() -> str:
    """The released layouts ``convert`` reads, one a line: name and what the files hold."""
    return "\n".join(f"  {layout.name:<13}{layout.description}" for layout in LAYOUTS if layout is not NATIVE)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a released checkpoint (timm/DeiT, iRPE, LaPE, Swin, PVT, Compact Transformers, T2T-ViT, CeiT) "
        "into a vitpos checkpoint",
        description=f"{__doc__}\nReleased layouts:\n{released_layouts()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "src",
        help="the released checkpoint: a .pth or .safetensors file, its URL, or a preset with released weights "
        "(downloaded once into the weights cache)",
    )
    p.add_argument("dst", help="folder to write model.safetensors and config.yaml into")
    p.add_argument(
        "--pretrained", action="store_true", help="SRC is a preset whose released weights to convert, never a path"
    )
    p.add_argument(
        "--force", action="store_true", help="replace the files an earlier vitpos convert wrote into DST (only those)"
    )
    p.add_argument("--model", metavar="NAME", help="preset to load into (default: the one the checkpoint fits)")
    p.add_argument(
        "--entry",
        metavar="KEY",
        help="dict entry holding the weights (default: model, else state_dict_ema, state_dict or model_ema)",
    )
    p.add_argument(
        "--keep-grid",
        action="store_true",
        help="build the model at the checkpoint's grid and window instead of resampling to the preset's",
    )
    p.add_argument(
        "--resize",
        choices=RESIZES,
        help="how tables stored for another size are fitted: timm (antialiased bicubic, geometric Swin tables) or "
        "model (the model's run-time resampling); default: timm for timm/DeiT, iRPE, LaPE and Swin files",
    )
    names = add_model_options(
        p, "override fields of the preset (a num_classes other than the checkpoint's re-initialises the classifier)"
    )
    p.set_defaults(func=run, option_names=names["model"] + names["slots"])
