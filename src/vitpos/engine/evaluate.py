"""Evaluation: loss and top-1/top-5, R², COCO AP or mIoU on a split, at one or several input resolutions.

At another resolution the model runs as trained, without fine-tuning: learned position tables
are resampled to the new grid, fixed ones recomputed, everything else as is (CPVT §4.2).
Synthetic tasks are drawn anew at the new size; other data are resized.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..data.dataset import ImageDataset, as_size, iterate_batches
from ..data.padded import model_inputs, padded_for
from ..data.transforms import normalize, to_float
from ..memory import batch_bytes, check_fits
from ..progress import progress
from ..tasks import loss_precision, task_for, task_kind
from .distributed import Dist, eval_batches
from .precision import Precision

__all__ = ["evaluate", "evaluate_with_ema", "evaluate_resolutions", "resolution_table", "input_dtype"]


def input_dtype(model: nn.Module) -> torch.dtype:
    """The dtype a model's inputs are cast to: that of its first floating parameter (float32 by default)."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    dataset: ImageDataset,
    *,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    ctx: Dist = Dist(),
    precision: Precision | None = None,
    workers: int = 0,
) -> dict[str, float]:
    """Loss and acc1/acc5 (percent), r2, AP (detection) or miou (segmentation) of ``model`` on ``dataset``, over all
    processes; ``precision`` gives the autocast (none by default)."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    info = dataset.info
    was_training = model.training
    model.eval()
    task = task_for(info, model)
    dataset = padded_for(dataset, getattr(getattr(model, "cfg", None), "stride", 1))
    metrics = task.metrics(device, image_hw=dataset.image_size)
    dtype = input_dtype(model)
    batches = eval_batches(len(dataset), batch_size, ctx)
    for images, targets in iterate_batches(dataset, batches, workers, pin_memory=device.type == "cuda"):
        x = normalize(to_float(images.to(device, non_blocking=True)), info.mean, info.std).to(dtype)
        targets = targets.to(device, non_blocking=True)
        x, padding = model_inputs(x, targets)
        with (precision or Precision(device.type)).autocast():
            outputs = loss_precision(model(x, **padding))
        metrics.add_loss(task.loss(outputs, targets), len(x))
        metrics.add_predictions(outputs, targets)
    model.train(was_training)
    return metrics.reduced(ctx).compute()


def evaluate_with_ema(
    model: nn.Module, ema: nn.Module | None, dataset: ImageDataset, prefix: str, **kwargs
) -> dict[str, float]:
    """:func:`evaluate` of ``model`` (keys ``prefix`` + metric) and of its ``ema`` where there is one
    (keys ``ema_`` + ``prefix`` + metric); ``kwargs`` go to :func:`evaluate`."""
    out = {prefix + k: v for k, v in evaluate(model, dataset, **kwargs).items()}
    if ema is not None:
        out |= {f"ema_{prefix}{k}": v for k, v in evaluate(ema, dataset, **kwargs).items()}
    return out


def evaluate_resolutions(
    model: nn.Module, dataset: ImageDataset, sizes: Sequence[int | tuple[int, int]], **kwargs
) -> dict[tuple[int, int], dict[str, float]]:
    """:func:`evaluate` at every image size in ``sizes`` (each a multiple of the patch size)."""
    cfg = getattr(model, "cfg", None)
    patch = getattr(cfg, "size_multiple", 1)
    pad = getattr(cfg, "pad_to_patch", False)
    batch, device = kwargs.get("batch_size", 256), kwargs.get("device")
    for hw in map(as_size, sizes):
        if not pad and (hw[0] % patch or hw[1] % patch):
            raise ValueError(
                f"resolution {hw[0]}x{hw[1]} is not a multiple of the patch size {patch}; pick multiples of {patch}"
            )
        if cfg is not None:
            check_fits(
                f"evaluating at {hw[0]}x{hw[1]} in batches of {batch}",
                batch_bytes(cfg.stages, cfg.in_chans, batch, hw),
                "evaluate at smaller sizes (--resolutions) or in smaller batches (--batch-size)",
                device,
            )
    results = {}
    for size in progress(sizes, "evaluating at each size", unit="size"):
        hw = as_size(size)
        results[hw] = evaluate(model, dataset.at_size(hw), **kwargs)
    return results


def _size_label(hw: tuple[int, int]) -> str:
    return str(hw[0]) if hw[0] == hw[1] else f"{hw[0]}x{hw[1]}"


def _params(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}K"


def resolution_table(rows: list[tuple[str, int, dict[tuple[int, int], dict[str, float]]]], task: str) -> str:
    """A markdown table like CPVT's Table 2: one row per model, one column per resolution.

    ``rows`` holds (name, parameter count, results of :func:`evaluate_resolutions`). Rows after
    the first show their difference to the first row in parentheses, as CPVT does. A task with
    further metrics (detection: AP50, AP75, APs, APm, APl) gets a column for each beside its headline.
    """
    kind = task_kind(task)
    columns = [(kind.headline, kind.unit), *kind.details]
    sizes = list(dict.fromkeys(hw for _, _, results in rows for hw in results))
    header = ["Model", "Params", *(f"{_size_label(hw)}({unit})" for hw in sizes for _, unit in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    base = rows[0][2] if rows else {}
    fmt = f"{{:.{kind.decimals}f}}"
    for i, (name, params, results) in enumerate(rows):
        cells = [name, _params(params)]
        for hw in sizes:
            for metric, _ in columns:
                value = results.get(hw, {}).get(metric)
                cell = "—" if value is None else fmt.format(value)
                ref = base.get(hw, {}).get(metric)
                if i > 0 and value is not None and ref is not None:
                    cell += f"({'+' if value >= ref else ''}{fmt.format(value - ref)})"
                cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
