"""Every bad input a user can give, from Python and from the command line, and the error it gets.

Each case is a row: what is tried, and a pattern the message must match; the patterns name the
field, option or file and what to do instead. Python cases must raise a :class:`VitposError`
(never a traceback from deep inside torch); command-line cases must exit with status 2 and
print exactly one error line. Nothing may be silently accepted.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pickle
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file, safe_open, save_file

import vitpos
from vitpos.analysis.awareness import position_awareness
from vitpos.analysis.equivariance import equivariance_error
from vitpos.analysis.probes import probe_table
from vitpos.analysis.relative_maps import reference_lattice
from vitpos.cli import main
from vitpos.config import ModelConfig, PositionConfig, PyramidConfig
from vitpos.data.catalog import open_data
from vitpos.data.synthetic import SyntheticTask
from vitpos.deploy import export_model
from vitpos.encodings.relative.buckets import relative_buckets
from vitpos.engine import RunRequest, TrainConfig, evaluate_resolutions, load_training_checkpoint, run_lock, train
from vitpos.engine.train import RunChangedWarning
from vitpos.errors import VitposError
from vitpos.models.saved_encoding import load_position_encoding, save_position_encoding
from vitpos.study import StudyConfig, parse_family, run_study
from vitpos.study.report import report_from_results

from .engine.conftest import TINY_MODEL, tiny_request

DATA = "synthetic:direction:img=16:train=64:val=32:test=32"
MODEL = ["--model=thesis_vit", *(f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.items())]
FAST = ["--epochs=1", "--batch-size=32", "--warmup-epochs=0", "--no-progress"]
TINY_ANALYSIS = ["--img-size", "32", "--depth", "1", "--head", "gap"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A one-epoch run of a tiny 2-class direction model."""
    run_dir = tmp_path_factory.mktemp("bad_inputs") / "run"
    train(*tiny_request(n=64, epochs=1, run_dir=str(run_dir)).resolve())
    return run_dir


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _with_metadata(run: Path, key: str, text: str) -> Path:
    """``run``'s checkpoint with one metadata entry of model.safetensors replaced by ``text``."""
    file = load_training_checkpoint(run, with_state=False).path / "model.safetensors"
    with safe_open(str(file), framework="pt") as f:
        meta = dict(f.metadata())
    save_file(load_file(str(file)), str(file), metadata={**meta, key: text})
    return file


_FORBIDDEN = re.compile(r"weights_only|\x1b|inline_container|SafetensorError")
"""What no message may contain: torch's advice to unpickle anything, colour codes, C++ or Rust internals."""

MARKER = Path(tempfile.gettempdir()) / f"vitpos-bad-inputs-ran-code-{os.getpid()}"
"""The file a hostile pickle writes if anything unpickles it without weights_only."""


class _RunsCode:
    """A pickle that would run a command (writing :data:`MARKER`) if unpickled without weights_only."""

    def __reduce__(self):
        return (os.system, (f"touch '{MARKER}'",))


def _tamper_state(run: Path) -> Path:
    file = load_training_checkpoint(run, with_state=False).path / "state.pt"
    file.write_bytes(pickle.dumps({"optimizer": _RunsCode()}, protocol=2))
    return file


def _thesis(**overrides):
    return vitpos.create_model("thesis_vit", **overrides).eval()


def _tiny_model():
    return vitpos.create_model("thesis_vit", **TINY_MODEL, num_classes=2).eval()


def _random_bytes(folder: Path, name: str = "random.pth") -> Path:
    path = folder / name
    path.write_bytes(bytes(range(256)) * 8)  # no pickle, no zip: 2 KiB of every byte value
    return path


def _hostile_pickle(folder: Path) -> Path:
    path = folder / "hostile.pth"
    torch.save({"model": _RunsCode()}, path)
    return path


def _huge_config(run: Path, tmp_path: Path) -> Path:
    """A copy of ``run`` whose checkpoint says embed_dim=2**20."""
    copy = _copy(run, tmp_path)
    config = load_training_checkpoint(run, with_state=False).model_config.to_dict() | {"embed_dim": 2**20}
    _with_metadata(copy, "model_config", json.dumps(config))
    return copy


def _position_file(folder: Path, **metadata: str | None) -> Path:
    """A saved learned position table with ``metadata`` entries replaced (None: removed)."""
    path = save_position_encoding(_thesis(absolute="learned"), folder / "pe.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    meta = {k: v for k, v in (meta | metadata).items() if v is not None}
    save_file(load_file(str(path)), str(path), metadata=meta)
    return path


def _results_json(folder: Path, text: str) -> Path:
    folder.joinpath("results.json").write_text(text)
    return folder


def _coco(folder: Path, image: dict | None = None, annotation: dict | None = None) -> Path:
    """A COCO folder of one 32x32 image with one box, its fields updated (a value None removes the field)."""
    img = {"id": 1, "file_name": "a.png", "width": 32, "height": 32} | (image or {})
    ann = {"id": 7, "image_id": 1, "category_id": 1, "bbox": [1, 2, 8, 8], "iscrowd": 0} | (annotation or {})
    data = {
        "images": [{k: v for k, v in img.items() if v is not None}],
        "annotations": [{k: v for k, v in ann.items() if v is not None}],
        "categories": [{"id": 1, "name": "square"}],
    }
    root = folder / "coco"
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(data))
    return root


COCO_BAD = [
    (
        "bbox as strings",
        None,
        {"bbox": ["1", "2", "8", "8"]},
        r"annotation 7 \(image 1\) has bbox \['1', '2', '8', '8'\] with",
    ),
    (
        "bbox missing",
        None,
        {"bbox": None},
        r"annotation 7 \(image 1\) has no bbox; write it as \[x, y, width, height\]",
    ),
    ("bbox of 3", None, {"bbox": [1, 2, 8]}, r"annotation 7 \(image 1\) has bbox \[1, 2, 8\], not a list of 4 numbers"),
    (
        "bbox NaN",
        None,
        {"bbox": [1, 2, float("nan"), 8]},
        r"annotation 7 .*bbox \[1, 2, nan, 8\] with a value that is not a finite",
    ),
    ("width missing", {"width": None}, None, r"image 1 \(a.png\): its width is missing; give the image's width"),
    ("width 'wide'", {"width": "wide"}, None, r"image 1 \(a.png\): its width is 'wide'; give the image's width"),
]


# ---- Python API: (id, call taking (tmp_path, finished_run), pattern) ----------------------------

API_CASES = [
    ("create_model(123)", lambda t, r: vitpos.create_model(123), r"preset .*or a config .*got 123 \(int\)"),
    (
        "TrainConfig(seed=2**70)",
        lambda t, r: TrainConfig(seed=2**70),
        r"TrainConfig.seed = 1180591620717411303424 \(int\) .*in \[0, 4294967295\]; integers must fit in 64 bits",
    ),
    (
        "depth=2**70",
        lambda t, r: _thesis(depth=2**70),
        r"depth = 1180591620717411303424 .*an integer >= 1; integers must fit in 64 bits",
    ),
    (
        "peg@0-99999999999999999999",
        lambda t, r: _thesis(conditional="peg@0-99999999999999999999"),
        r"position 99999999999999999998 in placement '0-9+' is beyond any model's depth: positions go up to 4095",
    ),
    (
        "xl:max_dist=999999999",
        lambda t, r: _thesis(relative="xl:max_dist=999999999"),
        r"'xl:max_dist=999999999': option max_dist='999999999' is invalid \(must be an integer in 1..256\)",
    ),
    (
        "fourier:dim=999999999",
        lambda t, r: _thesis(absolute="fourier:dim=999999999"),
        r"option dim='999999999' is invalid \(must be an integer in 1..65536\)",
    ),
    ("list_models(123)", lambda t, r: vitpos.list_models(123), r"list_models: pattern must be a string .*got 123"),
    ("img_size=-32", lambda t, r: _thesis(img_size=-32), r"img_size = -32 .*expected an integer >= 1"),
    (
        "img_size=(32,32,32)",
        lambda t, r: _thesis(img_size=(32, 32, 32)),
        r"img_size = \(32, 32, 32\).*list of 2 integers >= 1",
    ),
    ("mlp_ratio=0", lambda t, r: _thesis(mlp_ratio=0), r"mlp_ratio = 0 .*a number > 0"),
    ("mlp_ratio=-2", lambda t, r: _thesis(mlp_ratio=-2.0), r"mlp_ratio = -2.0 .*a number > 0"),
    ("drop_path_rate=-0.5", lambda t, r: _thesis(drop_path_rate=-0.5), r"drop_path_rate = -0.5 .*in \[0, 1\)"),
    ("drop_rate=1.5", lambda t, r: _thesis(drop_rate=1.5), r"drop_rate = 1.5 .*in \[0, 1\)"),
    ("depth='2'", lambda t, r: _thesis(depth="2"), r"depth = '2' \(str\).*an integer >= 1"),
    ("depth=True", lambda t, r: _thesis(depth=True), r"depth = True \(bool\).*an integer >= 1"),
    ("num_heads=0", lambda t, r: _thesis(num_heads=0), r"num_heads = 0 .*>= 1"),
    ("qkv_bias='yes'", lambda t, r: _thesis(qkv_bias="yes"), r"qkv_bias = 'yes'.*true or false"),
    ("head='max'", lambda t, r: ModelConfig(head="max"), r"head = 'max'.*one of cls, gap"),
    ("from_dict depth 'two'", lambda t, r: ModelConfig.from_dict({"depth": "two"}), r"ViTConfig.depth = 'two'"),
    ("from_dict not a mapping", lambda t, r: ModelConfig.from_dict(["depth"]), r"read from a mapping .*got list"),
    (
        "from_dict position key",
        lambda t, r: ModelConfig.from_dict({"position": {"absolut": "x"}}),
        r"ViTConfig.position = .*mapping of its fields \(absolute, join",
    ),
    ("slot not a string", lambda t, r: PositionConfig(absolute=3), r"PositionConfig.absolute = 3 \(int\).*a string"),
    (
        "unknown model key",
        lambda t, r: ModelConfig.from_dict({"depthh": 3}),
        r"unknown model config key.*depthh.*valid keys",
    ),
    (
        "embed_dim % heads",
        lambda t, r: ModelConfig(embed_dim=100, num_heads=3),
        r"embed_dim=100 is not divisible by num_heads=3; choose",
    ),
    ("img_size % patch", lambda t, r: ModelConfig(img_size=100), r"not divisible by patch_size 16.*pad_to_patch"),
    (
        "cls head without token",
        lambda t, r: ModelConfig(head="cls", class_token=False),
        r"needs class_token=True; use head='gap'",
    ),
    (
        "unknown slot value",
        lambda t, r: PositionConfig(absolute="sincos3d"),
        r"unknown absolute encoding 'sincos3d'; valid values",
    ),
    ("bad slot string", lambda t, r: PositionConfig(relative="irpe::k"), r"empty option in slot value"),
    (
        "slot option twice",
        lambda t, r: PositionConfig(absolute="fourier:gamma=1:gamma=2"),
        r"option 'gamma' is given twice",
    ),
    ("unknown preset", lambda t, r: vitpos.create_model("deit_huge"), r"unknown model 'deit_huge'; valid values"),
    (
        "pyramid depths '2'",
        lambda t, r: vitpos.get_config("pvt_tiny", depths=(2, "2", 2, 2)),
        r"PVTConfig.depths = .*list of one or more integers >= 1",
    ),
    ("pyramid window 0", lambda t, r: vitpos.get_config("swin_tiny", window_size=0), r"window_size = 0 .*>= 1"),
    ("pyramid arch", lambda t, r: PyramidConfig(arch="vit"), r"arch = 'vit'.*one of pvt, swin"),
    (
        "epochs 'ten'",
        lambda t, r: TrainConfig.from_dict({"epochs": "ten"}),
        r"TrainConfig.epochs = 'ten' \(str\).*an integer >= 1",
    ),
    ("lr 'fast'", lambda t, r: TrainConfig(lr="fast"), r"TrainConfig.lr = 'fast'.*a number >= 0"),
    ("lr '1e-3' from YAML", lambda t, r: TrainConfig(lr="1e-3"), r"lr = '1e-3'.*write it with a dot, 1.0e-3"),
    ("lr nan", lambda t, r: TrainConfig(lr=float("nan")), r"lr = nan .*a number >= 0"),
    (
        "min_lr > lr",
        lambda t, r: TrainConfig(lr=0.001, min_lr=1),
        r"min_lr = 1.0 is above lr = 0.001.*set min_lr <= lr",
    ),
    ("epochs 0", lambda t, r: TrainConfig(epochs=0), r"epochs = 0 .*>= 1"),
    ("batch_size -1", lambda t, r: TrainConfig(batch_size=-1), r"batch_size = -1 .*>= 1"),
    ("betas three", lambda t, r: TrainConfig(betas=(0.9, 0.99, 0.9)), r"betas = .*list of 2 numbers in \[0, 1\)"),
    ("ema_decay 1", lambda t, r: TrainConfig(ema_decay=1.0), r"ema_decay = 1.0 .*in \[0, 1\)"),
    ("hflip 2", lambda t, r: TrainConfig(hflip=2.0), r"hflip = 2.0 .*in \[0, 1\] or None"),
    ("device 'foo'", lambda t, r: TrainConfig(device="foo"), r"device = 'foo'.*one of auto, cpu, cuda, cuda:N, mps"),
    (
        "train option unknown",
        lambda t, r: TrainConfig.from_dict({"epoch": 3}),
        r"unknown training option.*epoch.*valid",
    ),
    (
        "data key twice",
        lambda t, r: open_data("synthetic:direction:train=500:train=600"),
        r"option 'train' is given twice.*give each option once",
    ),
    ("data size 0", lambda t, r: open_data("synthetic:direction:train=0"), r"SyntheticTask.train = 0 .*>= 1"),
    ("data size text", lambda t, r: open_data("synthetic:direction:val=many"), r"option val='many' is invalid"),
    ("data unknown task", lambda t, r: SyntheticTask(task="colour"), r"task = 'colour'.*one of direction"),
    ("data unknown source", lambda t, r: open_data("imagenet:/x"), r"unknown data source 'imagenet'.*valid forms"),
    ("data no room", lambda t, r: open_data("synthetic:direction:img=6"), r"no room for two 4-pixel squares"),
    (
        "forward float64",
        lambda t, r: _thesis()(torch.randn(1, 3, 32, 32, dtype=torch.float64)),
        r"images are torch.float64 .*x.to\(torch.float32\)",
    ),
    (
        "forward uint8",
        lambda t, r: _thesis()(torch.zeros(1, 3, 32, 32, dtype=torch.uint8)),
        r"floating-point images, got torch.uint8; convert with x.float\(\)",
    ),
    (
        "forward list",
        lambda t, r: _thesis()([[0.0] * 32] * 32),
        r"takes a torch.Tensor .*got list; convert with torch.as_tensor",
    ),
    ("forward 0x0", lambda t, r: _thesis()(torch.zeros(1, 3, 0, 0)), r"images are 0x0 pixels.*resize them"),
    (
        "forward channels",
        lambda t, r: _thesis()(torch.zeros(1, 1, 32, 32)),
        r"expected images of shape \(B, 3, H, W\), got \(1, 1, 32, 32\)",
    ),
    (
        "forward size",
        lambda t, r: _thesis()(torch.zeros(1, 3, 30, 30)),
        r"30x30 is not divisible by the patch size 4.*pad_to_patch",
    ),
    (
        "probe folds 1000",
        lambda t, r: probe_table(torch.randn(64, 8), (8, 8), folds=1000),
        r"folds = 1000 is more than the 21 a 8x8 grid allows.*use at most 21",
    ),
    ("probe folds 1", lambda t, r: probe_table(torch.randn(64, 8), (8, 8), folds=1), r"folds must be >= 2"),
    (
        "equivariance shift",
        lambda t, r: equivariance_error(_thesis(), torch.randn(2, 3, 32, 32), (100, 100)),
        r"shift \(100, 100\) leaves the 8x8 grid.*fewer patches",
    ),
    (
        "equivariance margin",
        lambda t, r: equivariance_error(_thesis(), torch.randn(2, 3, 32, 32), (1, 1), margin=4),
        r"no interior cells left.*smaller shift or margin",
    ),
    (
        "awareness folds",
        lambda t, r: position_awareness(_thesis(depth=1), torch.randn(3, 3, 32, 32), folds=5),
        r"folds = 5: .*3 images, so use 2 to 3 folds",
    ),
    ("lattice per_side 0", lambda t, r: reference_lattice((8, 8), 0), r"per_side = 0: need at least 1"),
    (
        "resume, no checkpoint",
        lambda t, r: train(*tiny_request(n=64, epochs=1, run_dir=str(t / "empty")).resolve(), resume=True),
        r"holds no checkpoint to resume.*--resume-if-present",
    ),
    (
        "run_dir is a file",
        lambda t, r: (
            t.joinpath("f").write_text("x"),
            train(*tiny_request(n=64, epochs=1, run_dir=str(t / "f")).resolve()),
        ),
        r"run folder .*/f is a file, not a folder; choose another --run-dir",
    ),
    (
        "run_dir under a file",
        lambda t, r: (
            t.joinpath("f").write_text("x"),
            train(*tiny_request(n=64, epochs=1, run_dir=str(t / "f" / "run")).resolve()),
        ),
        r"cannot create run folder .*a part of the path is a file",
    ),
    (
        "existing run, no --resume",
        lambda t, r: train(*tiny_request(n=64, epochs=1, run_dir=str(_copy(r, t))).resolve()),
        r"already holds checkpoint step-\d+; pass --resume",
    ),
    (
        "resume, shorter run",
        lambda t, r: train(*tiny_request(n=64, epochs=1, run_dir=str(_shortened(r, t))).resolve(), resume=True),
        r"already trained 2 epochs, more than epochs=1.*resume with epochs >= 2",
    ),
    (
        "resume, other model",
        lambda t, r: train(
            *tiny_request(n=64, epochs=2, run_dir=str(_copy(r, t)), model={"depth": 2}).resolve(), resume=True
        ),
        r"different model \(depth: checkpoint 1, requested 2\)",
    ),
    (
        "checkpoint JSON",
        lambda t, r: (_with_metadata(_copy(r, t), "model_config", "{not json"), load_training_checkpoint(t / "copy")),
        r"model.safetensors: the 'model_config' entry of its metadata is not valid JSON.*restore it",
    ),
    (
        "checkpoint config",
        lambda t, r: (
            _with_metadata(_copy(r, t), "model_config", '{"depth": "two"}'),
            load_training_checkpoint(t / "copy"),
        ),
        r"model.safetensors: its model_config metadata is invalid \(ViTConfig.depth = 'two'",
    ),
    (
        "checkpoint tampered",
        lambda t, r: (_tamper_state(_copy(r, t)), load_training_checkpoint(t / "copy")),
        r"state.pt is truncated or corrupt, or holds objects vitpos never writes \(UnpicklingError\).*Restore it",
    ),
    (
        "checkpoint missing",
        lambda t, r: load_training_checkpoint(t / "nothing"),
        r"checkpoint .*nothing does not exist",
    ),
    (
        "checkpoint truncated",
        lambda t, r: (_truncate(_copy(r, t)), load_training_checkpoint(t / "copy")),
        r"model.safetensors is truncated or corrupt",
    ),
    (
        "run folder locked",
        lambda t, r: _train_while_locked(t),
        r"run folder .* is in use by another vitpos process \(pid \d+\); wait for it to finish",
    ),
    (
        "run folder read-only",
        lambda t, r: _train_read_only(t),
        r"run folder .* is not writable \(permission denied\); make it writable",
    ),
    (
        "img_size=160000",
        lambda t, r: _thesis(img_size=160_000),
        r"this vit \(depth \d+, width \d+; 160000x160000 images\), its weights and one image's tokens, would need",
    ),
    (
        "batch of 0 images",
        lambda t, r: _thesis()(torch.zeros(0, 3, 32, 32)),
        r"the batch is empty: images of shape \(0,",
    ),
    (
        "images on meta",
        lambda t, r: _thesis()(torch.zeros(1, 3, 32, 32, device="meta")),
        r"images are on device meta but the model is on cpu; move them with x.to\('cpu'\)",
    ),
    (
        "train('thesis_vit', ...)",
        lambda t, r: train("thesis_vit", TrainConfig()),
        r"train: model_cfg must be a model config, got 'thesis_vit' \(str\); build one with vitpos.get_config",
    ),
    ("open_data(None)", lambda t, r: open_data(None), r"open_data: spec must be a data spec string .*got None"),
    (
        "from_mapping train: [1, 2]",
        lambda t, r: RunRequest.from_mapping({"train": [1, 2]}),
        r"section 'train' must be a mapping of option: value, not \[1, 2\]",
    ),
    (
        "lape:chained:chained",
        lambda t, r: PositionConfig(join="lape:chained:chained"),
        r"flag 'chained' is given twice in 'lape:chained:chained'; give each flag once",
    ),
    (
        "peg:frozen:frozen",
        lambda t, r: PositionConfig(conditional="peg:frozen:frozen"),
        r"flag 'frozen' is given twice in 'peg:frozen:frozen'",
    ),
    (
        "family absolute= twice",
        lambda t, r: parse_family("mine: absolute=none absolute=learned"),
        r"family 'mine': 'absolute' is given twice; give it once",
    ),
    (
        "drop=('haed',)",
        lambda t, r: vitpos.load_weights(_tiny_model(), r, drop=("haed",)),
        r"drop pattern\(s\) 'haed' match no parameter of the model .*parameters start with .*head",
    ),
    (
        "run_study(workers=0)",
        lambda t, r: run_study(StudyConfig(seeds=1), t / "study", workers=0),
        r"run_study: workers = 0; expected an integer >= 1",
    ),
    (
        "embed_dim=2**20",
        lambda t, r: _thesis(embed_dim=2**20, num_heads=1),
        r"this vit \(depth \d+, width 1048576; 32x32 images\), its weights and one image's tokens, would need at least "
        r"[\d.]+ TiB, more than the .* of memory on this machine; check embed_dim, depth and img_size",
    ),
    (
        "checkpoint embed_dim=2**20",
        lambda t, r: vitpos.load_model(_huge_config(r, t)),
        r"checkpoint .*step-\d+: the model its config describes cannot be built here: .*width 1048576.* would need",
    ),
    (
        "evaluate at 50000 pixels",
        lambda t, r: evaluate_resolutions(_tiny_model(), open_data(DATA).test, [50000]),
        r"evaluating at 50000x50000 in batches of 256 would need at least [\d.]+ TiB, more than",
    ),
    (
        "bucket table of a huge grid",
        lambda t, r: relative_buckets("product", (100_000, 100_000)),
        r"iRPE bucket ids for a 100000x100000 grid \(10000000000 tokens.* would need at least .*; use a smaller grid",
    ),
    (
        "position file without 'absolute'",
        lambda t, r: load_position_encoding(_thesis(absolute="learned"), _position_file(t, absolute=None)),
        r"position-encoding file .*pe.safetensors lacks the 'absolute' entry of its metadata; write it again",
    ),
    (
        "position file grid not JSON",
        lambda t, r: load_position_encoding(_thesis(absolute="learned"), _position_file(t, grid="{8, 8")),
        r"pe.safetensors: its 'grid' metadata '\{8, 8' is malformed",
    ),
    (
        "position file embed_dim 'wide'",
        lambda t, r: load_position_encoding(_thesis(absolute="learned"), _position_file(t, embed_dim="wide")),
        r"pe.safetensors: its 'embed_dim' metadata 'wide' is malformed",
    ),
    (
        "results.json not JSON",
        lambda t, r: report_from_results(_results_json(t, "{not json")),
        r"results.json is not valid JSON \(Expecting property name .*line 1 column 2",
    ),
    (
        "results.json without cells",
        lambda t, r: report_from_results(_results_json(t, '{"config": {}}')),
        r"results.json: entry 'cells' is missing or of the wrong type \(None\)",
    ),
    (
        "random-bytes .pth",
        lambda t, r: vitpos.load_weights(_tiny_model(), _random_bytes(t)),
        r"random.pth is truncated, corrupt or not a PyTorch checkpoint \(it does not unpickle as one\)",
    ),
    (
        "hostile pickle .pth",
        lambda t, r: vitpos.load_weights(_tiny_model(), _hostile_pickle(t)),
        r"hostile.pth holds objects other than tensors and plain containers \(posix.system\); vitpos never unpickles",
    ),
    (
        "export into /proc",
        lambda t, r: export_model(_tiny_model(), "/proc/vitpos-model.pt2", fmt="pt2", min_size=16, max_size=32),
        r"cannot write /proc/vitpos-model.pt2: folder /proc does not accept new files",
    ),
    *(
        (
            f"COCO {name}",
            lambda t, r, i=image, a=ann: open_data(f"coco:{_coco(t, i, a)}"),
            r"instances_train.json: " + p,
        )
        for name, image, ann, p in COCO_BAD
    ),
]


def _shortened(run: Path, tmp_path: Path) -> Path:
    """A copy of ``run`` continued to 2 epochs."""
    copy = _copy(run, tmp_path)
    with pytest.warns(RunChangedWarning, match="epochs 1 -> 2"):
        train(*tiny_request(n=64, epochs=2, run_dir=str(copy)).resolve(), resume=True)
    return copy


def _truncate(run: Path) -> None:
    file = load_training_checkpoint(run, with_state=False).path / "model.safetensors"
    file.write_bytes(file.read_bytes()[:100])


def _train_while_locked(tmp_path: Path) -> None:
    run_dir = tmp_path / "busy"
    run_dir.mkdir()
    with open(run_dir / run_lock.LOCK_FILE, "w") as held:
        held.write("12345\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)
        train(*tiny_request(n=64, epochs=1, run_dir=str(run_dir)).resolve())


def _train_read_only(tmp_path: Path) -> None:
    run_dir = tmp_path / "ro"
    run_dir.mkdir()
    run_dir.chmod(0o555)
    real_access = os.access
    # the tests may run as root, for whom every folder is writable: ask as an ordinary user would
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_lock.os, "access", lambda p, mode: False if Path(p) == run_dir else real_access(p, mode))
        train(*tiny_request(n=64, epochs=1, run_dir=str(run_dir)).resolve())


@pytest.mark.parametrize("call,pattern", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_python_api_bad_input_is_a_clear_error(call, pattern, tmp_path, finished_run, record_property):
    try:
        call(tmp_path, finished_run)
        outcome, message = "silent", "accepted without an error"
    except VitposError as err:
        message = str(err.args[0]) if isinstance(err, KeyError) else str(err)
        outcome = "clear" if re.search(pattern, message) and not _FORBIDDEN.search(message) else "unclear"
    except Exception as err:  # anything but vitpos's own error reaches the user as a traceback
        outcome, message = "traceback", f"{type(err).__name__}: {err}"
    record_property("outcome", outcome)  # read by tests/hostile_census.py
    assert outcome == "clear", message
    assert not MARKER.exists(), "a hostile pickle ran"


def test_init_with_another_head_says_it_starts_the_head_afresh(tmp_path, finished_run, caplog):
    with caplog.at_level(logging.INFO, logger="vitpos.weights"):
        train(*tiny_request("direction4", n=64, epochs=1, init=str(finished_run)).resolve())
    lines = [r.getMessage() for r in caplog.records if r.name == "vitpos.weights"]
    assert len(lines) == 1 and re.search(
        r"its classifier has 2 outputs, the model's 4; the head is re-initialised", lines[0]
    )


def test_changed_schedule_on_resume_warns(tmp_path, finished_run):
    run_dir = _copy(finished_run, tmp_path)
    with pytest.warns(RunChangedWarning, match=r"changed training options \(epochs 1 -> 2; lr 0.003 -> 0.001\)"):
        result = train(*tiny_request(n=64, epochs=2, lr=1e-3, run_dir=str(run_dir)).resolve(), resume=True)
    assert result.history[-1]["epoch"] == 2  # the run continues to the new schedule's end


def test_resume_if_present_starts_a_new_run(tmp_path):
    result = train(*tiny_request(n=64, epochs=1, run_dir=str(tmp_path / "new")).resolve(), resume="if_present")
    assert result.checkpoint is not None and result.history[-1]["epoch"] == 1


def test_same_options_on_resume_do_not_warn(tmp_path, finished_run):
    run_dir = _copy(finished_run, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunChangedWarning)
        result = train(*tiny_request(n=64, epochs=1, run_dir=str(run_dir)).resolve(), resume=True)
    assert result.history[-1]["epoch"] == 1  # the finished run is found, not trained again


# ---- command line: (id, argv with RUN/TMP placeholders, pattern) -------------------------------

CLI_CASES = [
    ("train --lr fast", ["train", *MODEL, "--lr", "fast"], r"argument --lr: invalid float value: 'fast'"),
    ("train --epochs ten", ["train", *MODEL, "--epochs", "ten"], r"argument --epochs: invalid int value: 'ten'"),
    (
        "train --seed 8589934592",
        ["train", *MODEL, f"--data={DATA}", "--seed", "8589934592"],
        r"TrainConfig.seed = 8589934592 \(int\) is not allowed: expected an integer in \[0, 4294967295\]",
    ),
    (
        "pretrain-pe --seed 2**64",
        ["pretrain-pe", "--seed", str(2**64)],
        r"argument --seed: must be a non-negative integer below 2\*\*63",
    ),
    ("train --epochs 0", ["train", *MODEL, f"--data={DATA}", "--epochs", "0"], r"TrainConfig.epochs = 0 .*>= 1"),
    (
        "train --min-lr > --lr",
        ["train", *MODEL, f"--data={DATA}", "--lr", "0.001", "--min-lr", "1"],
        r"min_lr = 1.0 is above lr = 0.001.*set min_lr <= lr",
    ),
    (
        "train --img-size 32,48,64",
        ["train", *MODEL, f"--data={DATA}", "--img-size", "32,48,64"],
        r"img_size = \(32, 48, 64\).*list of 2 integers",
    ),
    (
        "train --mlp-ratio -2",
        ["train", *MODEL, f"--data={DATA}", "--mlp-ratio", "-2"],
        r"mlp_ratio = -2.0 .*a number > 0",
    ),
    (
        "train --device foo",
        ["train", *MODEL, f"--data={DATA}", "--device", "foo"],
        r"device = 'foo'.*one of auto, cpu, cuda, cuda:N, mps",
    ),
    (
        "train --data key twice",
        ["train", *MODEL, "--data=synthetic:direction:train=500:train=600"],
        r"option 'train' is given twice",
    ),
    (
        "train --absolute sincos3d",
        ["train", *MODEL, f"--data={DATA}", "--absolute=sincos3d"],
        r"unknown absolute encoding 'sincos3d'; valid values",
    ),
    (
        "train --resume, empty",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--resume", "--run-dir=TMP/typo"],
        r"run folder .*typo holds no checkpoint to resume.*--resume-if-present",
    ),
    (
        "train --resume, no folder",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--resume"],
        r"run folder runs/thesis_vit-.* holds no checkpoint to resume",
    ),
    (
        "train --resume --epochs 1",
        ["train", "--run-dir=RUN2", "--resume", "--epochs=1"],
        r"already trained 2 epochs, more than epochs=1.*resume with epochs >= 2",
    ),
    (
        "train --run-dir FILE",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--run-dir=TMP/file.txt"],
        r"run folder .*file.txt is a file, not a folder",
    ),
    (
        "train --config epochs: ten",
        ["train", *MODEL, "--config=TMP/epochs.yaml"],
        r"TrainConfig.epochs = 'ten' \(str\).*an integer >= 1",
    ),
    ("train --config lr: fast", ["train", *MODEL, "--config=TMP/lr.yaml"], r"TrainConfig.lr = 'fast'"),
    (
        "train --config depth: two",
        ["train", "--config=TMP/depth.yaml"],
        r"ViTConfig.depth = 'two' \(str\).*an integer >= 1",
    ),
    ("train --config not YAML", ["train", "--config=TMP/broken.yaml"], r"config file .*broken.yaml is not valid YAML"),
    ("train --config missing", ["train", "--config=TMP/none.yaml"], r"config file .*none.yaml does not exist"),
    (
        "train --config alias bomb",
        ["train", "--config=TMP/bomb.yaml"],
        r"config file .*bomb.yaml expands to more than 100000 values through its aliases \(line \d+\)",
    ),
    (
        "train --config 20k deep",
        ["train", "--config=TMP/deep.yaml"],
        r"config file .*deep.yaml nests mappings or lists more than 32 deep \(line 1\)",
    ),
    (
        "train --config duplicate key",
        ["train", "--config=TMP/twice.yaml"],
        r"config file .*twice.yaml: line 3: key 'epochs' is given twice in one mapping; keep one",
    ),
    (
        "train --config train: [1, 2]",
        ["train", "--config=TMP/list.yaml"],
        r"config file .*list.yaml: section 'train' must be a mapping of name: value lines, not a list \(\[1, 2\]\)",
    ),
    (
        "train --config not UTF-8",
        ["train", "--config=TMP/latin1.yaml"],
        r"config file .*latin1.yaml is not UTF-8 text \(byte 0xe9 at offset 18\); save it as UTF-8",
    ),
    (
        "train --config huge value quoted short",
        ["train", *MODEL, "--config=TMP/long.yaml"],
        r"TrainConfig.epochs = 'xxxx+\.\.\.x+' \(str\)",
    ),
    (
        "train --resume tampered",
        ["train", "--run-dir=TAMPERED", "--resume", "--epochs=2"],
        r"state.pt is truncated or corrupt, or holds objects vitpos never writes",
    ),
    ("train unknown option", ["train", "--epocks=3"], r"usage: vitpos train .*unrecognized arguments: --epocks=3"),
    (
        "eval --batch-size 0",
        ["eval", "--checkpoint=RUN", "--batch-size", "0"],
        r"argument --batch-size: must be a positive integer, got '0'",
    ),
    ("eval --device foo", ["eval", "--checkpoint=RUN", "--device", "foo"], r"device = 'foo'.*one of auto, cpu"),
    (
        "eval task mismatch",
        ["eval", "--checkpoint=RUN", "--data=synthetic:distance:img=16:test=32"],
        r"trained for classification on .*but synthetic:distance.* is a regression task; "
        r"evaluate it on classification data",
    ),
    (
        "eval classes mismatch",
        ["eval", "--checkpoint=RUN", "--data=synthetic:direction4:img=16"],
        r"num_classes=2 but .* has 4 classes",
    ),
    (
        "eval broken JSON",
        ["eval", "--checkpoint=BROKEN"],
        r"model.safetensors: the 'model_config' entry of its metadata is not valid JSON",
    ),
    (
        "eval --resolutions 0",
        ["eval", "--checkpoint=RUN", "--resolutions", "16,0"],
        r"argument --resolutions: image size '0' must be at least 1 pixel",
    ),
    (
        "eval no checkpoint",
        ["eval", "--checkpoint=TMP"],
        r"holds no checkpoint \(expected checkpoints/step-\*/model.safetensors\)",
    ),
    (
        "probe --folds 1000",
        ["probe", *TINY_ANALYSIS, "--absolute=sincos2d", "--folds", "1000", "--out=TMP/o"],
        r"folds = 1000 is more than the 21 a 8x8 grid allows",
    ),
    ("probe --folds 0", ["probe", "--folds", "0"], r"argument --folds: must be a positive integer, got '0'"),
    (
        "equivariance --shift 100,100",
        ["equivariance", *TINY_ANALYSIS, "--shift", "100,100", "--out=TMP/o"],
        r"shift \(100, 100\) leaves the 8x8 grid",
    ),
    ("equivariance --shift 1", ["equivariance", "--shift", "1"], r"shift '1' must look like 'rows,cols'"),
    (
        "relative-bias --attention-head 99",
        ["relative-bias", *TINY_ANALYSIS, "--relative=swin", "--attention-head", "99", "--out=TMP/o"],
        r"--attention-head 99 does not exist: the model has 4 heads; use 0 to 3",
    ),
    (
        "relative-bias --per-side 0",
        ["relative-bias", "--per-side", "0"],
        r"argument --per-side: must be a positive integer, got '0'",
    ),
    (
        "relative-bias --block 7",
        ["relative-bias", *TINY_ANALYSIS, "--relative=swin", "--block", "7", "--out=TMP/o"],
        r"block 7 does not exist; the model has 1 layers",
    ),
    (
        "awareness --folds 9",
        ["awareness", *TINY_ANALYSIS, "--images", "4", "--folds", "9", "--out=TMP/o"],
        r"folds = 9: .*4 images",
    ),
    ("attention --images 0", ["attention", "--images", "0"], r"argument --images: must be a positive integer, got '0'"),
    (
        "similarity --mlp-ratio",
        ["similarity", "--mlp-ratio", "-2"],
        r"usage: vitpos similarity .*unrecognized arguments: --mlp-ratio -2",
    ),
    (
        "similarity --img-size -32",
        ["similarity", "--img-size", "-32"],
        r"argument --img-size: must be a positive integer, got '-32'",
    ),
    (
        "analysis --checkpoint + --depth",
        ["similarity", "--checkpoint=RUN", "--depth=2", "--out=TMP/o"],
        r"--checkpoint fixes the model; drop --depth",
    ),
    ("analysis --model unknown", ["probe", "--model=nothing", "--out=TMP/o"], r"unknown model 'nothing'; valid values"),
    ("buckets --ratio -1", ["buckets", "--ratio", "-1"], r"argument --ratio: must be a positive number, got '-1'"),
    ("buckets --grid 0", ["buckets", "--grid", "0"], r"grid '0' must look like '14x14'"),
    ("pretrain-pe --size 0", ["pretrain-pe", "--size", "0"], r"argument --size: must be a positive integer, got '0'"),
    (
        "convert into a run folder",
        ["convert", "TMP/released.pth", "RUN"],
        r"config\.yaml was not written by vitpos convert \(no record of it in .*\); --force replaces only the files "
        r"vitpos convert wrote",
    ),
    (
        "convert into a file",
        ["convert", "TMP/released.pth", "TMP/file.txt"],
        r"file.txt is a file; give a folder",
    ),
    (
        "export over a file",
        ["export", "--model=thesis_vit", "TMP/file.txt"],
        r"file\.txt was not written by vitpos export \(no record of it in .*\); --force replaces only the files",
    ),
    ("export to a folder", ["export", "--model=thesis_vit", "TMP"], r"cli_cases\d* is a folder; give a file name"),
    (
        "pretrain-pe --out EXISTING",
        ["pretrain-pe", "--out=TMP/file.txt"],
        r"file\.txt was not written by vitpos pretrain-pe \(no record of it in .*\); --force replaces only the",
    ),
    ("pretrain-pe --out FOLDER", ["pretrain-pe", "--out=TMP", "--force"], r"is a folder; give a file name"),
    ("models nothing*", ["models", "nothing*"], r"no model matches 'nothing\*'"),
    ("models nothing", ["models", "nothing"], r"no model matches 'nothing'"),
    (
        "similarity --refs -1,0",
        ["similarity", "--refs", "-1,0"],
        r"argument --refs: expected one argument \(a value that starts with '-' is joined .* e.g. --refs=-1\)",
    ),
    (
        "similarity --refs=-1,0",
        ["similarity", *TINY_ANALYSIS, "--refs=-1,0", "--out=TMP/o"],
        r"reference cell \(-1, 0\) is outside the 8x8 grid",
    ),
    (
        "buckets --methods ,,,",
        ["buckets", "--methods", ",,,", "--out=TMP/o"],
        r"--methods ',,,' names no method; give one or more of euclidean, quant, cross, product",
    ),
    ("unknown command", ["trian"], r"invalid choice: 'trian'"),
    (
        "train --lr 1e6 diverges",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--epochs=3", "--lr=1e6", "--run-dir=TMP/diverged"],
        r"training diverged: the training loss was nan at step \d+; the run stopped and the last finite checkpoint "
        r"is kept: .*diverged/checkpoints/step-\d+\. Lower --lr \(now 1e\+06\), tighten --grad-clip",
    ),
    (
        "eval --resolutions 50000",
        ["eval", "--checkpoint=RUN", "--resolutions", "50000"],
        r"evaluating at 50000x50000 in batches of 256 would need at least [\d.]+ TiB, more than the .* of memory on "
        r"this machine; evaluate at smaller sizes \(--resolutions\)",
    ),
    (
        "buckets --grid 100000x100000",
        ["buckets", "--grid", "100000x100000", "--out=TMP/o"],
        r"iRPE bucket ids for a 100000x100000 grid .* would need at least .*; use a smaller grid",
    ),
    (
        "eval a checkpoint of embed_dim 2**20",
        ["eval", "--checkpoint=HUGE"],
        r"checkpoint .*huge_run/checkpoints/step-\d+: the model its config describes cannot be built here: "
        r"this vit \(depth 1, width 1048576; 16x16 images\), its weights .* would need at least 48 TiB",
    ),
    (
        "train --init-drop haed",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--init=RUN", "--init-drop=haed", "--run-dir=TMP/drop"],
        r"drop pattern\(s\) 'haed' match no parameter of the model and no key of checkpoint .*; the model's "
        r"parameters start with .*head",
    ),
    (
        "train --join lape:chained:chained",
        ["train", *MODEL, f"--data={DATA}", "--join=lape:chained:chained"],
        r"flag 'chained' is given twice in 'lape:chained:chained'",
    ),
    (
        "train --conditional peg:frozen:frozen",
        ["train", *MODEL, f"--data={DATA}", "--conditional=peg:frozen:frozen"],
        r"flag 'frozen' is given twice in 'peg:frozen:frozen'",
    ),
    (
        "study --family with absolute= twice",
        ["study", "--family", "mine: absolute=none absolute=learned", "--out=TMP/study"],
        r"family 'mine': 'absolute' is given twice; give it once",
    ),
    (
        "probe --img-size 160000",
        ["probe", "--img-size", "160000", "--depth", "1", "--out=TMP/o"],
        r"this vit \(depth 1, width \d+; 160000x160000 images\), .* would need at least [\d.]+ GiB",
    ),
    ("study --workers 0", ["study", "--workers", "0"], r"argument --workers: must be a positive integer, got '0'"),
    ("study --workers=-1", ["study", "--workers=-1"], r"argument --workers: must be a positive integer, got '-1'"),
    (
        "study --report-only, corrupt results.json",
        ["study", "--report-only", "--out=TMP/corrupt_study"],
        r"corrupt_study/results.json is not valid JSON \(Expecting property name",
    ),
    (
        "train --embed-dim 100 --num-heads 3",
        ["train", "--model=thesis_vit", f"--data={DATA}", "--embed-dim=100", "--num-heads=3"],
        r"embed_dim=100 is not divisible by num_heads=3; choose a head count that divides the width "
        r"\(num_heads 1, 2, 4, 5, 10, 20, \.\.\.\) or a multiple of 3 as embed_dim$",
    ),
    (
        "train --init random bytes",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--init=TMP/random.pth", "--run-dir=TMP/init_random"],
        r"random.pth is truncated, corrupt or not a PyTorch checkpoint \(it does not unpickle as one\); download",
    ),
    (
        "train --init hostile pickle",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--init=TMP/hostile.pth", "--run-dir=TMP/init_hostile"],
        r"hostile.pth holds objects other than tensors and plain containers \(posix.system\)",
    ),
    (
        "train --init-pe without 'absolute'",
        ["train", *MODEL, f"--data={DATA}", *FAST, "--init-pe=TMP/pe.safetensors", "--run-dir=TMP/init_pe"],
        r"position-encoding file .*pe.safetensors lacks the 'absolute' entry of its metadata",
    ),
    *(
        (
            f"train --data coco, {name}",
            ["train", "--model=thesis_vit", f"--data=coco:TMP/coco_{i}"],
            r"coco_\d/annotations/instances_train.json: " + pattern,
        )
        for i, (name, _, _, pattern) in enumerate(COCO_BAD)
    ),
    (
        "export into /proc",
        ["export", "--model=thesis_vit", "/proc/vitpos-model.pt2"],
        r"cannot write /proc/vitpos-model.pt2: folder /proc does not accept new files \(No such file or directory\)",
    ),
    (
        "convert into /proc",
        ["convert", "TMP/random.pth", "/proc/vitpos-run"],
        r"cannot write /proc/vitpos-run: folder /proc does not accept new files",
    ),
]


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, finished_run) -> dict[str, Path]:
    """The files and folders the command-line cases name."""
    root = tmp_path_factory.mktemp("cli_cases")
    (root / "file.txt").write_text("not a folder")
    (root / "epochs.yaml").write_text(yaml.safe_dump({"train": {"data": DATA, "epochs": "ten"}}))
    (root / "lr.yaml").write_text("train:\n  data: " + DATA + "\n  lr: fast\n")
    (root / "depth.yaml").write_text(
        yaml.safe_dump({"model": {"preset": "thesis_vit", "depth": "two"}, "train": {"data": DATA}})
    )
    (root / "broken.yaml").write_text("train: [unclosed\n")
    levels = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else '0'] * 9)}]\n" for i in range(9))
    (root / "bomb.yaml").write_text(levels + "train:\n  init_drop: *l8\n")  # 300 bytes, 9**9 values expanded
    (root / "deep.yaml").write_text("[" * 20_000 + "]" * 20_000)
    (root / "twice.yaml").write_text("train:\n  epochs: 3\n  epochs: 4\n")
    (root / "list.yaml").write_text("train: [1, 2]\n")
    (root / "latin1.yaml").write_bytes("train:\n  data: café\n".encode("latin-1"))
    (root / "long.yaml").write_text(yaml.safe_dump({"train": {"data": DATA, "epochs": "x" * 100_000}}))
    broken = root / "broken_run"
    shutil.copytree(finished_run, broken)
    _with_metadata(broken, "model_config", "{not json")
    tampered = root / "tampered_run"
    shutil.copytree(finished_run, tampered)
    _tamper_state(tampered)
    run2 = root / "run2"
    shutil.copytree(finished_run, run2)
    with pytest.warns(RunChangedWarning, match="epochs 1 -> 2"):
        train(*tiny_request(n=64, epochs=2, run_dir=str(run2)).resolve(), resume=True)
    huge = _huge_config(finished_run, root)
    huge.rename(root / "huge_run")
    _random_bytes(root)
    _hostile_pickle(root)
    _position_file(root, absolute=None)
    (root / "corrupt_study").mkdir()
    _results_json(root / "corrupt_study", "{not json")
    for i, (_, image, annotation, _) in enumerate(COCO_BAD):
        _coco(root, image, annotation).rename(root / f"coco_{i}")
    return {
        "TMP": root,
        "RUN2": run2,
        "RUN": finished_run,
        "BROKEN": broken,
        "TAMPERED": tampered,
        "HUGE": root / "huge_run",
    }


@pytest.mark.parametrize("argv,pattern", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_command_line_bad_input_is_one_clear_line(argv, pattern, cli_files, capsys, record_property):
    for name in ("RUN2", "RUN", "BROKEN", "TAMPERED", "HUGE", "TMP"):  # RUN2 before RUN, which it starts with
        argv = [arg.replace(name, str(cli_files[name])) for arg in argv]
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse: usage line, then the error
        status = stop.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    text = " ".join(lines)
    if status == 0:
        outcome = "silent"
    elif status != 2 or "Traceback" in err:
        outcome = "traceback"
    else:
        one_line = bool(lines) and lines[-1].startswith(("vitpos", "usage")) and ": error: " in lines[-1]
        outcome = "clear" if one_line and re.search(pattern, text) and not _FORBIDDEN.search(err) else "unclear"
    record_property("outcome", outcome)  # read by tests/hostile_census.py
    assert outcome == "clear", f"status {status}: {err}"
    assert not MARKER.exists(), "a hostile pickle ran"


def test_an_unexpected_error_keeps_its_traceback_and_is_called_a_bug(monkeypatch, capsys):
    def broken(args):
        return [][1]

    monkeypatch.setattr("vitpos.commands.models.add_parser", _parser_with(broken))
    assert main(["models"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "IndexError" in err and "this is a bug in vitpos" in err


def test_a_value_error_from_inside_a_library_is_a_bug(monkeypatch, capsys):
    def broken(args):
        return int("not a number from deep inside")  # raised by int(), not by vitpos code

    monkeypatch.setattr("vitpos.commands.models.add_parser", _parser_with(broken))
    assert main(["models"]) == 1
    assert "this is a bug in vitpos" in capsys.readouterr().err


def test_ctrl_c_outside_training_prints_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("vitpos.commands.models.add_parser", _parser_with(interrupted))
    assert main(["models"]) == 130
    assert capsys.readouterr().err.splitlines() == ["vitpos models: interrupted"]


def _parser_with(func):
    def add_parser(sub):
        sub.add_parser("models").set_defaults(func=func)

    return add_parser


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"vitpos {vitpos.__version__}"


def test_a_bare_word_matches_model_names_containing_it(capsys):
    assert main(["models", "deit"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names and all("deit" in n for n in names) and "deit_tiny_patch16_224" in names
    assert names == vitpos.list_models("*deit*") == vitpos.list_models("deit")  # the API agrees with the CLI
    assert "cpvt_ti_gap" not in vitpos.list_models("deit") and "cpvt_ti_gap" in vitpos.list_models("cpvt")
    assert main(["models", "deit*"]) == 0
    assert all(line.startswith("deit") for line in capsys.readouterr().out.splitlines()[1:])


def test_help_text_of_each_slot_gives_an_example_of_that_slot(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for slot in ("absolute", "join", "conditional", "relative"):
        assert re.search(rf"override the {slot} slot, e.g. --{slot} \S+", text)


def test_help_imports_neither_torch_nor_the_commands():
    import subprocess
    import sys

    code = (
        "import sys; from vitpos.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('vitpos.commands.')))"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src}, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "train" in out.stdout and "relative-bias" in out.stdout
