"""``vitpos train``: train a model on a data set; runs as is under ``torchrun``.

Settings come in layers, later ones winning: the dataclass defaults, a ``--recipe`` (a paper's
training recipe, see :mod:`vitpos.engine.recipes`), the run's saved ``config.yaml`` (with
``--resume``), a ``--config`` YAML file, then the options given here. ``--print-config`` prints
the resolved settings, the model's in full as the run's ``config.yaml`` holds them, as a YAML
config (which ``--config`` reads back) and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from ..config import HostConfig
from ..data.dataset import DataInfo
from ..engine.config import TrainConfig
from ..engine.interrupt import TrainingInterrupted
from ..engine.recipes import RECIPES, blame_recipe, check_recipe_fits, get_recipe
from ..engine.records import run_config
from ..engine.setup import RunRequest
from ..engine.train import Resume, train
from ..files import write_atomic
from ..ownership import claim
from ..tasks import task_kind
from ..tasks.chance import chance_note
from ..weights.data_config import DATA_CONFIG_FILE, DataConfig
from ..weights.run_folder import CONFIG_FILE
from .options import Once, add_dataclass_options, add_model_options, given_options

_NOT_HASHED = ("data", "run_dir", "progress", "device", "workers")
"""Training options that do not change what a run computes, or are in its folder's name already."""
_RESUME_FLAGS: dict[str, Resume] = {"resume": True, "resume_if_present": "if_present"}
"""What --resume and --resume-if-present ask of :func:`~vitpos.engine.train.train`."""


def default_run_dir(request: RunRequest) -> str:
    """``runs/<preset>-<data>`` with the data spec made file-name safe, and ``-<hash>`` when any other
    model or training option is set: 8 hex digits of a hash of those options, so each configuration
    of an ablation gets its own folder and the same command finds its folder again (``--resume``)."""
    data = request.train.get("data", TrainConfig.data)
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", f"{request.preset or 'model'}-{data}").strip("-")
    options = {"model": request.model, "train": {k: v for k, v in request.train.items() if k not in _NOT_HASHED}}
    if request.model or options["train"]:
        text = json.dumps(options, sort_keys=True, default=str)
        slug += "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return str(Path("runs") / slug)


def build_request(args: argparse.Namespace) -> RunRequest:
    """Stack the recipe, the saved run config (on resume), the config file and the command-line options."""
    return layered_request(args)[0]


def layered_request(args: argparse.Namespace) -> tuple[RunRequest, dict[str, str]]:
    """:func:`build_request`, and where each setting it holds came from: ``{option: "recipe deit" |
    "the run's config.yaml" | "config FILE" | "command line"}`` (options absent are defaults)."""
    names = args.option_names
    cli = RunRequest(
        args.model, given_options(args, names["model"] + names["slots"]), given_options(args, names["train"])
    )
    file = RunRequest.from_yaml(args.config) if args.config else RunRequest()
    if args.pretrained:  # the preset's name: resolved to its released file when the weights are loaded
        cli.train["init"] = _pretrained_init(args.model or file.preset, cli.train.get("init"))
    layers = [(f"config {args.config}", file), ("command line", cli)]  # lowest first
    request = file.merged(cli)
    recipe = None
    if args.recipe:
        chosen = get_recipe(args.recipe)
        recipe = RunRequest(model=dict(chosen.model), train=dict(chosen.train))
    if "run_dir" not in request.train:  # --run-dir none (None) keeps nothing on disk
        request.train["run_dir"] = default_run_dir(request if recipe is None else recipe.merged(request))
    run_dir = request.train["run_dir"]
    if args.resume and run_dir:
        saved = Path(run_dir) / CONFIG_FILE
        if saved.is_file():
            base = RunRequest.from_yaml(saved)
            if request.preset:  # a model named anew is checked against the checkpoint, not merged into it
                base = RunRequest(train=base.train)
            request = base.merged(request)
            layers.insert(0, (f"the run's {CONFIG_FILE}", base))
    if recipe is not None:  # the lowest layer: a resumed run keeps the values it was saved with
        request = recipe.merged(request)
        layers.insert(0, (f"recipe {args.recipe}", recipe))
    origins = {key: origin for origin, layer in layers for key in (*layer.model, *layer.train)}
    return request, origins


def _pretrained_init(preset: str | None, init: str | None) -> str:
    """What ``--pretrained`` sets ``init`` to: the preset whose released weights the run starts from."""
    if preset is None or init is not None:
        raise ValueError("--pretrained starts from the released weights of --model NAME; give --model, and not --init")
    return preset


@contextlib.contextmanager
def _epoch_lines() -> Iterator[None]:
    """Print the trainer's per-epoch log lines (shown with --no-progress, when there is no bar) on stdout."""
    logger, handler = logging.getLogger("vitpos"), logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run(args: argparse.Namespace) -> int:
    request, origins = layered_request(args)
    model_cfg, train_cfg, data = request.resolve()
    train_cfg = train_cfg.replace(data=data.info.spec)  # as the run records it
    if args.print_config:
        print(f"# recipe: {args.recipe or 'none'}; peak learning rate after warm-up: {train_cfg.peak_lr:g}")
        print(yaml.safe_dump(run_config(model_cfg, train_cfg), sort_keys=False), end="")
        return 0
    if args.recipe:
        check_recipe_fits(args.recipe, origins, data)
    resume = _RESUME_FLAGS.get(args.resume, False)
    if train_cfg.run_dir:  # a new run replaces no file in its folder that an earlier run did not write
        claim(train_cfg.run_dir, strict=not resume)
    try:
        with _epoch_lines():
            result = train(model_cfg, train_cfg, data, resume=resume, name=request.preset, origins=origins)
    except ValueError as err:
        blamed = blame_recipe(err, args.recipe, origins) if args.recipe else err
        if blamed is err:
            raise
        raise blamed from None
    except TrainingInterrupted as stop:
        print(f"vitpos train: {_continue_line(stop)}", file=sys.stderr)
        return 130
    if int(os.environ.get("RANK", "0")) == 0:
        if result.run_dir is not None:
            _write_data_config(result.run_dir, model_cfg, train_cfg, data.info)
        kind = task_kind(data.info.task)
        metrics = "  ".join(kind.format_metric(k, v) for k, v in result.test.items())
        where = f"run folder {result.run_dir}" if result.run_dir else "no run folder"
        note = chance_note(result.history, kind.headline, data.info.num_outputs)
        print(f"{where}: {result.evaluated_split} {metrics}" + (f"; {note}" if note else ""))
    return 0


def _write_data_config(run_dir: Path, model_cfg: HostConfig, train_cfg: TrainConfig, info: DataInfo) -> None:
    """``RUN/data_config.yaml``: how to prepare an image for the trained model (its checkpoints carry the same)."""
    prepared = DataConfig.of_run(model_cfg.image_hw, dataclasses.asdict(info), train_cfg.to_dict(), model_cfg.in_chans)
    header = "# how to prepare an image for this run's model: input size, mean and std, resize and crop, output names\n"
    write_atomic(Path(run_dir) / DATA_CONFIG_FILE, header + yaml.safe_dump(prepared.to_dict(), sort_keys=False))


def _continue_line(stop: TrainingInterrupted) -> str:
    """The one line printed on Ctrl-C: where the run stopped and the command that continues it."""
    if stop.checkpoint is None or stop.run_dir is None:
        return f"interrupted at step {stop.step}; nothing was saved"
    return (
        f"interrupted at step {stop.step}; `vitpos train --run-dir {shlex.quote(str(stop.run_dir))} --resume` continues"
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model (any preset, any position slots) on synthetic or real data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="YAML file with 'model' and 'train' sections")
    p.add_argument("--model", metavar="NAME", help="model preset to start from (see `vitpos models`)")
    p.add_argument(
        "--recipe",
        action=Once,
        choices=tuple(RECIPES),
        help="a paper's training recipe as the base of every option: "
        + "; ".join(f"{r.name} ({r.source})" for r in RECIPES.values()),
    )
    p.add_argument(
        "--pretrained",
        action="store_true",
        help="start from the released weights of --model (as --init NAME; `vitpos models --pretrained` lists them), "
        "downloaded once into the weights cache",
    )
    p.add_argument("--print-config", action="store_true", help="print the resolved settings as YAML and exit")
    resume = p.add_mutually_exclusive_group()
    resume.add_argument(
        "--resume",
        dest="resume",
        action="store_const",
        const="resume",
        help="continue the run in --run-dir from its newest checkpoint (an error if it has none); its saved "
        "config.yaml is the base for every option (a --model given again must match the checkpoint; "
        "other changed training options are applied with a warning)",
    )
    resume.add_argument(
        "--resume-if-present",
        dest="resume",
        action="store_const",
        const="resume_if_present",
        help="like --resume, but start a new run when --run-dir holds no checkpoint",
    )
    run_dir_help = (
        "Folder for the config, metrics and checkpoints (default: runs/<model>-<data>, plus -<hash of the other "
        "options> when any is given, so each configuration has its own)."
    )
    names = {
        "train": add_dataclass_options(
            p.add_argument_group("training options"), TrainConfig, help_overrides={"run_dir": run_dir_help}
        )
    }
    names |= add_model_options(
        p,
        "override fields of the preset (the defaults), those of its host: a ViT's depth, a pyramid's per-stage depths "
        "(e.g. --depths 1,1,1,1); num_classes, in_chans and img_size follow the data unless given",
    )
    p.set_defaults(func=run, option_names=names)
