"""Write a model as a vitpos checkpoint folder that ``vitpos eval`` and ``vitpos train --init`` read.

``DST/model.safetensors`` holds the weights, with the resolved model config in its metadata
(the run-folder checkpoint format); ``DST/config.yaml`` holds the same config as a ``--config``
file for ``vitpos train`` (which reads plain-ViT configs), with ``train.init`` pointing back at DST.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from torch import nn

from ..config import HostConfig
from ..files import check_destination, write_atomic
from .data_config import IMAGENET_MEAN, IMAGENET_STD, DataConfig
from .run_folder import CONFIG_FILE, MODEL_FILE, write_weights

__all__ = ["released_data_config", "write_checkpoint"]


def released_data_config(cfg: HostConfig) -> DataConfig:
    """The preprocessing of the released ImageNet models (DeiT's evaluation: bicubic, crop 0.875, ImageNet
    mean and std) at the model's input size; the class names are not in the released files."""
    return DataConfig((cfg.in_chans, *cfg.image_hw), IMAGENET_MEAN, IMAGENET_STD)


def write_checkpoint(model: nn.Module, dst: str | Path, data_config: DataConfig | None = None, **notes: Any) -> Path:
    """Write ``model`` to the folder ``dst`` (created; files replaced atomically) with its data config
    (default: :func:`released_data_config`); ``notes`` go into the metadata."""
    dst = Path(dst)
    host_cfg = model.cfg
    if not isinstance(host_cfg, HostConfig):
        raise TypeError(f"a {type(model).__name__} has no vitpos config (.cfg); give a model built by vitpos")
    prepared = data_config or released_data_config(host_cfg)
    data = prepared.check_outputs(host_cfg.num_classes, f"checkpoint {dst}").to_dict()
    check_destination(dst, folder=True, force=True)
    dst.mkdir(parents=True, exist_ok=True)
    cfg = host_cfg.to_dict()
    meta = {"model_config": cfg, "train_config": {}, "data": {}, "data_config": data, "notes": notes}
    write_weights(dst / MODEL_FILE, model.state_dict(), meta)
    header = (
        "# model converted by `vitpos convert`; evaluate it with `vitpos eval --checkpoint DIR --data SPEC`,\n"
        "# fine-tune it with `vitpos train --init DIR --model PRESET --data SPEC` (a ViT also with\n"
        "# `vitpos train --config DIR/config.yaml --data SPEC`)\n"
    )
    body = {"model": cfg, "train": {"init": str(dst)}}
    write_atomic(dst / CONFIG_FILE, header + yaml.safe_dump(body, sort_keys=False))
    return dst
