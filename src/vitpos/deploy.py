"""Deployment at any resolution: one exported graph (``torch.export`` or ONNX) for a range of image sizes.

The image height and width are symbolic in the exported graph (multiples of the model's stride
between ``min_size`` and ``max_size``), and so is the batch. Grid sizes, resampled tables, fixed
tables, bucket ids and window layouts are computed from them inside the graph, so one file
serves every size in the range (see the README's "Export" section for what exports).

A size the graph was not built for fails inside a ``.pt2`` program with a shape-guard message, and
inside an ONNX file with the rule in the failing node's name (:mod:`.onnx_guard`); :class:`Deployed`
checks the size first and raises the eager model's own error instead, so a deployed model and the eager one reject
the same inputs with the same words. The YAML beside the graph also holds the model's data config
(:class:`~vitpos.weights.data_config.DataConfig`), which :meth:`Deployed.predict` applies to photographs.
"""

from __future__ import annotations

import contextlib
import io
import logging
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx.experimental._config as fx_config
import yaml
from torch import nn

from .config import HostConfig
from .errors import VitposError, quote
from .files import check_destination, replacing, write_atomic
from .models.factory import config_from_dict
from .models.host import Host, host_of
from .models.windows import WindowAttention
from .onnx_guard import add_size_check
from .pt2_archive import load_program
from .weights.data_config import DataConfig
from .weights.export import released_data_config
from .yaml_io import read_yaml

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["FORMATS", "ExportRange", "export_program", "export_model", "Deployed", "load_deployed"]

FORMATS = ("pt2", "onnx")
INPUT_NAME = "images"


@dataclass(frozen=True)
class ExportRange:
    """The image sides an exported graph accepts: multiples of ``stride`` in [min_size, max_size]."""

    min_size: int
    max_size: int
    stride: int

    def __post_init__(self) -> None:
        lo, hi = self.min_size, self.max_size
        if lo < self.stride or hi < lo:
            raise VitposError(
                f"export range {lo}..{hi} is empty or below one stride ({self.stride} pixels); "
                f"choose --min-size >= {self.stride} and --max-size >= --min-size"
            )
        if lo % self.stride or hi % self.stride:
            raise VitposError(
                f"--min-size {lo} and --max-size {hi} must be multiples of the model's stride {self.stride}"
            )

    def check(self, image_hw: tuple[int, int]) -> None:
        """Raise :class:`VitposError` if a side lies outside the range."""
        h, w = image_hw
        if not (self.min_size <= h <= self.max_size and self.min_size <= w <= self.max_size):
            raise VitposError(
                f"image size {h}x{w} is outside the exported range: both sides must lie in "
                f"{self.min_size}..{self.max_size}; "
                "resize the input or export again with --min-size/--max-size covering it"
            )

    def dynamic_shapes(self) -> dict[str, dict[int, Any]]:
        """``dynamic_shapes`` for ``torch.export``: a dynamic batch, sides ``stride * k``."""
        lo, hi = self.min_size // self.stride, self.max_size // self.stride
        side = {
            axis: self.stride * torch.export.Dim(name, min=lo, max=hi) for axis, name in ((2, "height"), (3, "width"))
        }
        return {"x": {0: torch.export.Dim("batch", min=1, max=4096), **side}}


def _example(model: Host, span: ExportRange) -> torch.Tensor:
    """A traced input: two images at the training size, moved into the range."""
    cfg = model.cfg
    h, w = (min(max(side, span.min_size), span.max_size) for side in cfg.image_hw)
    return torch.randn(2, cfg.in_chans, h, w)


def export_program(model: nn.Module, span: ExportRange) -> torch.export.ExportedProgram:
    """``torch.export`` of ``model`` (eval mode) with a dynamic batch and image size.

    The eager model first runs at the smallest size, so a range it cannot take fails with its
    own message. Size-oblivious reasoning (``backed_size_oblivious``) keeps the tracer from
    specialising on whether a symbolic size (windows per row, say) is 1.
    """
    host = host_of(model)
    model = model.eval()
    host.cfg.stage_grids((span.min_size, span.min_size))  # the eager model's error for a size it cannot take
    _check_normalised_window_bias(host, span)
    _check_dense_head(model, host, span)
    with torch.no_grad():
        try:
            model(torch.zeros(1, host.cfg.in_chans, span.min_size, span.min_size))
        except ValueError as err:
            raise VitposError(f"the model cannot run at --min-size {span.min_size}: {err}") from None
        # patch is added to the module at import by torch's install_config_module, which mypy does not see
        with fx_config.patch(backed_size_oblivious=True):  # type: ignore[attr-defined]
            return torch.export.export(model, (_example(host, span),), dynamic_shapes=span.dynamic_shapes())


def _check_dense_head(model: nn.Module, host: Host, span: ExportRange) -> None:
    """Raise if a task model built on ``host`` (a Semantic FPN) would see a last-stage grid of one cell:
    its upsampling then traces for that one size, and the graph would take no other."""
    if model is host or min(host.cfg.stage_grids((span.min_size, span.min_size))[-1]) > 1:
        return
    raise VitposError(
        f"at --min-size {span.min_size} the last stage of {type(model).__name__}'s host has a grid of one cell, "
        f"and torch.export fixes the image size of its upsampling there; use --min-size {2 * span.stride} or more"
    )


def _check_normalised_window_bias(model: Host, span: ExportRange) -> None:
    """Raise if a window block's relative terms read the window's extent (LaPE's bias normalised over
    keys, cpb's offsets scaled by the window) on a stage grid smaller than a window: the traced graph
    pads such axes to whole windows (see :mod:`vitpos.models.windows`), which would change them."""
    grids = model.cfg.stage_grids((span.min_size, span.min_size))
    too_small, smallest = [], span.min_size
    for index, (stage, grid) in enumerate(zip(model.stages, grids, strict=True)):
        windows = {
            attn.window_size
            for attn in stage.modules()
            if isinstance(attn, WindowAttention) and attn.relative is not None and attn.relative.reads_extent()
        }
        for size in windows:
            step = model.cfg.patch_size * 2**index  # pixels per token of this stage
            smallest = max(smallest, span.stride * -(-size * step // span.stride))
            if min(grid) < size:
                too_small.append(f"stage {index} (grid {grid[0]}x{grid[1]}, {size}x{size} windows)")
    if too_small:
        raise VitposError(
            f"a relative encoding in its windows reads the window's extent (join 'lape' normalises a bias over the "
            f"keys, relative 'cpb' without pretrained= scales offsets by the window), and the exported graph pads "
            f"a stage grid smaller than one window; at --min-size {span.min_size} that holds for "
            f"{', '.join(too_small)}; use --min-size {smallest} or more"
        )


def _metadata(cfg: HostConfig, span: ExportRange, fmt: str, data: DataConfig) -> str:
    export = {"format": fmt, "input": INPUT_NAME, **asdict(span), "torch": str(torch.__version__)}
    header = (
        "# vitpos export: the model config, the image sizes the exported graph accepts (sides that are\n"
        "# multiples of stride from min_size to max_size) and the data config (how to prepare an image)\n"
    )
    body = {"model": cfg.to_dict(), "export": export, "data": data.to_dict()}
    return header + yaml.safe_dump(body, sort_keys=False)


def metadata_path(path: str | Path) -> Path:
    """The YAML file written beside an exported graph: its whole name and ``.yaml`` (``m.onnx.yaml``), so the
    exports ``m.onnx`` and ``m.pt2`` never share one."""
    path = Path(path)
    return path.with_name(path.name + ".yaml")


def _metadata_of(path: Path) -> Path:
    """The YAML that describes ``path``: :func:`metadata_path`, or the ``m.yaml`` an earlier version of vitpos wrote."""
    meta = metadata_path(path)
    earlier = path.with_suffix(".yaml")
    return earlier if not meta.is_file() and earlier.is_file() else meta


def export_model(
    model: nn.Module,
    path: str | Path,
    *,
    fmt: str,
    min_size: int,
    max_size: int,
    data_config: DataConfig | None = None,
) -> Path:
    """Export ``model`` to ``path`` (``.pt2`` program or ONNX file) and its configs beside it (``data_config``
    by default the released ImageNet models' preprocessing); returns that YAML path."""
    if fmt not in FORMATS:
        raise VitposError(f"unknown export format {fmt!r}; valid values: {', '.join(FORMATS)}")
    host = host_of(model)  # a task model (Semantic FPN) exports whole, its host says which sizes fit
    cfg: HostConfig = getattr(model, "cfg", host.cfg)
    path = Path(path)
    span = ExportRange(min_size, max_size, cfg.stride)
    for target in (path, metadata_path(path)):
        check_destination(target, folder=False, force=True)
    if fmt == "onnx":
        _require_onnx()
    program = export_program(model, span)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        if fmt == "pt2":
            torch.export.save(program, tmp)
        else:
            with _quiet_onnx_exporter():
                onnx_program = torch.onnx.export(
                    program, dynamo=True, input_names=[INPUT_NAME], output_names=["output"], verbose=False
                )
            assert onnx_program is not None  # the dynamo exporter always returns a program
            onnx_program.save(str(tmp))
            add_size_check(tmp, INPUT_NAME, span.min_size, span.max_size, span.stride)
    meta = metadata_path(path)
    prepared = (data_config or released_data_config(host.cfg)).check_outputs(cfg.num_classes, f"export of {path}")
    write_atomic(meta, _metadata(cfg, span, fmt, prepared))
    return meta


@contextlib.contextmanager
def _quiet_onnx_exporter() -> Iterator[None]:
    """No progress lines of torch's ONNX exporter on stdout, nor its warnings that torchvision's
    operators are skipped (vitpos uses none of them)."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        registration.setLevel(level)


def _require_onnx() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise VitposError("ONNX export needs the packages onnx and onnxscript: pip install 'vitpos[export]'") from None


class Deployed(nn.Module):
    """An exported graph behind the eager model's input checks: images (B, C, H, W) -> outputs.

    Sizes the host cannot take raise the eager model's error, sizes outside the exported range
    say so and how to widen it; valid inputs go to the graph unchanged.
    """

    def __init__(
        self, run: Callable[[torch.Tensor], torch.Tensor], cfg: HostConfig, span: ExportRange, data: DataConfig
    ) -> None:
        super().__init__()
        self.run, self.cfg, self.span, self.data_config = run, cfg, span, data

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.cfg.in_chans:
            raise VitposError(f"expected images of shape (B, {self.cfg.in_chans}, H, W), got {tuple(x.shape)}")
        image_hw = (x.shape[-2], x.shape[-1])
        self.cfg.stage_grids(image_hw)
        self.span.check(image_hw)
        return self.run(x)

    def predict(self, images: Sequence[Image.Image], size: tuple[int, int] | None = None) -> torch.Tensor:
        """The outputs for photographs, each prepared as the data config says (resized, centre-cropped to
        ``size``, default the trained size, and normalised); ``data_config.label_names`` names the outputs."""
        return self(torch.stack([self.data_config.preprocess(image, size) for image in images]))


def load_deployed(path: str | Path) -> Deployed:
    """An exported ``.pt2`` program (torch) or ``.onnx`` file (onnxruntime) with its YAML, as :class:`Deployed`.

    A ``.pt2`` file is checked to hold only what ``vitpos export`` writes (see :mod:`vitpos.pt2_archive`)
    before torch reads it, so loading one never runs code from it.
    """
    path = Path(path)
    meta = _metadata_of(path)
    if not path.is_file():
        raise FileNotFoundError(f"no exported model at {path}; write one with `vitpos export`")
    if not meta.is_file():
        raise FileNotFoundError(f"{meta} is missing: `vitpos export` writes it beside {path.name}; export again")
    data = read_yaml(meta, "export metadata", sections=("model", "export", "data"))
    export = data.get("export") or {}
    missing = [key for key in ("model", "export") if not data.get(key)] + [
        f"export.{key}"
        for key in ("format", "min_size", "max_size", "stride")
        if data.get("export") and key not in export
    ]
    if missing:
        raise VitposError(f"export metadata {meta} lacks {', '.join(missing)}; write it again with `vitpos export`")
    if export["format"] not in FORMATS:
        raise VitposError(
            f"export metadata {meta}: format {quote(export['format'])} is not one of {', '.join(FORMATS)}"
        )
    if export["format"] == "onnx" and zipfile.is_zipfile(path):  # (a .pt2 archive is a zip file; ONNX is not)
        raise VitposError(
            f"export metadata {meta} describes an ONNX export, but {path} is a torch.export archive (another export "
            f"wrote {meta.name}); export {path.name} again to write its own {metadata_path(path).name}"
        )
    cfg, span = config_from_dict(data["model"]), ExportRange(*(export[k] for k in ("min_size", "max_size", "stride")))
    # a file exported before the data config was written gets the released models' preprocessing
    prepared = DataConfig.from_dict(data["data"], str(meta)) if data.get("data") else released_data_config(cfg)
    prepared.check_outputs(cfg.num_classes, str(meta))
    if export["format"] == "pt2":
        return Deployed(load_program(path).module(), cfg, span, prepared)
    return Deployed(_onnx_runner(path), cfg, span, prepared)


def _onnx_runner(path: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    try:
        import onnxruntime
    except ImportError:
        raise VitposError("running an ONNX file needs onnxruntime: pip install onnxruntime") from None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(x: torch.Tensor) -> torch.Tensor:
        (out,) = session.run(None, {INPUT_NAME: x.detach().cpu().float().numpy()})
        return torch.from_numpy(out)

    return run
