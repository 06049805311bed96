"""`vitpos train` and `vitpos eval`: options from the config dataclasses, YAML layering, errors."""

import dataclasses
import json
import re

import pytest
import torch
import yaml
from PIL import Image

from vitpos.cli import build_parser, main
from vitpos.commands.options import field_docs, parse_size_list
from vitpos.commands.train import build_request
from vitpos.config import ModelConfig, PositionConfig
from vitpos.engine import RunRequest, TrainConfig
from vitpos.engine.checkpoint import load_training_checkpoint

from ..engine.conftest import TINY_MODEL, without_times

DATA = "synthetic:direction:img=16:train=128:val=64:test=64"
FAST = ["--epochs=1", "--batch-size=32", "--lr=3e-3", "--warmup-epochs=0", "--no-progress"]
MODEL = ["--model=thesis_vit", *(f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.items())]


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for cls in (TrainConfig, ModelConfig, PositionConfig):
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            if f.name == "position":
                continue
            assert f"--{f.name.replace('_', '-')}" in text, f.name
            assert docs.get(f.name), f"{cls.__name__}.{f.name} has no docstring"
            assert " ".join(docs[f.name].split())[:40] in text, f.name
    assert "Global batch size" in text and "--no-amp" in text


def test_option_types():
    args = build_parser().parse_args(
        [
            "train",
            "--betas=0.8,0.9",
            "--hflip=none",
            "--img-size=16,32",
            "--no-compile",
            "--epochs=3",
            "--class-token=false",
        ]
    )
    assert args.betas == (0.8, 0.9) and args.hflip is None and args.img_size == (16, 32) and args.class_token is False
    assert build_parser().parse_args(["train", "--img-size=48", "--class-token=none"]).img_size == 48
    assert args.compile is False and args.epochs == 3 and not hasattr(args, "lr")  # untouched options stay unset
    assert parse_size_list("32,48x64") == [32, (48, 64)]


def test_default_run_folder_names_model_and_data():
    args = build_parser().parse_args(["train", "--model=thesis_vit", "--data=synthetic:distance:img=48"])
    assert build_request(args).train["run_dir"] == "runs/thesis_vit-synthetic-distance-img-48"


def _default_folder(*options: str) -> str:
    return build_request(build_parser().parse_args(["train", "--model=thesis_vit", *options])).train["run_dir"]


def test_default_run_folders_differ_per_configuration_and_are_found_again():
    ablation = [_default_folder(f"--absolute={a}") for a in ("learned", "sincos2d", "fourier")]
    ablation += [_default_folder("--absolute=fourier", f"--lr={lr}") for lr in ("1e-3", "3e-3")]
    assert len(set(ablation)) == 5 and all(f.startswith("runs/thesis_vit-synthetic-direction-") for f in ablation)
    assert _default_folder("--absolute=fourier") == ablation[2]  # the same command finds its folder
    assert _default_folder("--absolute=fourier", "--resume") == ablation[2]  # so --resume needs no --run-dir
    assert _default_folder("--absolute=fourier", "--no-progress") == ablation[2]  # display options do not count
    assert _default_folder("--run-dir=none") is None  # keep nothing on disk


def test_the_collision_hint_is_a_command_that_works(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    command = ["train", *MODEL, f"--data={DATA}", *FAST]
    assert main(command) == 0
    assert main(command) == 2
    assert "pass --resume to continue it" in capsys.readouterr().err
    assert main([*command, "--resume"]) == 0


def test_yaml_config_with_command_line_overrides(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"preset": "thesis_vit", **TINY_MODEL},
                "train": {"data": DATA, "epochs": 5, "batch_size": 32, "lr": 3e-3, "progress": False},
            }
        )
    )
    run_dir = tmp_path / "a"
    assert main(["train", f"--config={config}", "--epochs=2", f"--run-dir={run_dir}"]) == 0
    assert "test loss" in capsys.readouterr().out
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert (
        (run_dir / "metrics.csv").read_text().splitlines()[0].startswith("epoch,step,lr,train_loss,train_acc1,val_loss")
    )
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["train"]["epochs"] == 2 and saved["model"]["embed_dim"] == 64 and saved["model"]["num_classes"] == 2
    # the resolved config alone reproduces the run
    assert main(["train", f"--config={run_dir / 'config.yaml'}", f"--run-dir={tmp_path / 'b'}"]) == 0
    again = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["val_loss"] for r in again] == [r["val_loss"] for r in rows]


def test_eval_prints_a_resolution_table(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", *MODEL, f"--data={DATA}", *FAST, f"--run-dir={run_dir}"]) == 0
    capsys.readouterr()
    assert main(["eval", f"--checkpoint={run_dir}", "--resolutions=16,24,16x32"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"acc1 in % on the test split of synthetic:direction:\S+, by input size", lines[0])
    assert lines[2] == "| Model | Params | 16(%) | 24(%) | 16x32(%) |"
    assert lines[4].startswith("| run | 53.4K | ")
    saved = json.loads((run_dir / "eval-test-at16,24,16x32.json").read_text())  # named by the sizes
    assert list(saved["results"]) == ["16x16", "24x24", "16x32"] and saved["units"] == {"acc1": "%"}
    printed = [float(cell) for cell in lines[4].strip("| ").split(" | ")[2:]]
    assert printed == [round(r["acc1"], 1) for r in saved["results"].values()]
    assert (run_dir / "eval-test-at16,24,16x32.md").read_text() == "\n".join(lines[:5]) + "\n"
    assert main(["eval", f"--checkpoint={run_dir}", "--data=synthetic:direction4:img=16"]) == 2
    assert "num_classes=2 but synthetic:direction4:img=16:square=4 has 4 classes" in capsys.readouterr().err


def _fails(args, capsys) -> str:
    """The one error line of a failing command (warnings before it, e.g. about a changed schedule, aside)."""
    assert main(args) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and lines[0].startswith("vitpos ") and ": error: " in lines[0], lines
    return lines[0]


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    assert "holds no checkpoint to resume" in _fails(["train", *MODEL, f"--data={DATA}", "--resume"], capsys)
    assert "no model chosen" in _fails(["train", f"--data={DATA}", *FAST], capsys)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("model: thesis_vit\ntrain: {epoch: 3}\n")
    assert "unknown training option(s) epoch" in _fails(["train", f"--config={bad_yaml}"], capsys)
    assert "unknown absolute encoding 'sincos3d'" in _fails(
        ["train", *MODEL, "--absolute=sincos3d", f"--data={DATA}"], capsys
    )


def test_unreadable_image_fails_and_keeps_the_earlier_checkpoint(tmp_path, capsys):
    root = tmp_path / "imgs"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(16):
            Image.new("RGB", (10, 10), (20 * i, 0, 0)).save(root / name / f"{i}.png")
    run_dir = tmp_path / "run"
    common = [*MODEL, f"--data=folder:{root}", "--batch-size=8", "--no-progress", f"--run-dir={run_dir}"]
    assert main(["train", *common, "--epochs=1"]) == 0
    checkpoint = run_dir / "checkpoints" / "step-00000003"
    before = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    (root / "dog" / "3.png").write_bytes(b"\x89PNG but then nothing")
    err = _fails(["train", *common, "--epochs=2", "--resume"], capsys)
    assert "cannot read image" in err and "3.png" in err
    assert {p.name: p.read_bytes() for p in checkpoint.iterdir()} == before
    assert torch.load(checkpoint / "state.pt", weights_only=True)["epoch"] == 1


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *MODEL, f"--data={DATA}", *FAST, f"--run-dir={run_dir}"]) == 0
    return run_dir


@pytest.mark.parametrize(
    "bad,message",
    [
        (["--data=folder:/no/such/folder"], "image folder /no/such/folder does not exist"),
        (["--data=folder:EMPTY"], "class folder .*dog holds no images"),
        (["--img-size=18"], "img_size 18 is not divisible by patch_size 4"),
        (["--depth=2"], "depth: checkpoint 1, requested 2"),
        (
            ["--data=synthetic:direction4:img=16:train=128:val=64:test=64"],
            "num_classes=2 but synthetic:direction4:img=16:square=4:train=128:val=64:test=64 has 4 classes",
        ),
        (
            ["--num-classes=4", "--data=synthetic:direction4:img=16:train=128:val=64:test=64"],
            "num_classes: checkpoint 2, requested 4",
        ),
        (["--model=vit_lite_7_4"], "different model .*embed_dim: checkpoint 64, requested 256"),
    ],
)
def test_bad_input_keeps_the_earlier_checkpoint(finished_run, tmp_path, capsys, bad, message):
    (tmp_path / "cat").mkdir()
    (tmp_path / "dog").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "cat" / "0.png")
    bad = [arg.replace("EMPTY", str(tmp_path)) for arg in bad]
    files = sorted((finished_run / "checkpoints").rglob("*"))
    before = {p: p.read_bytes() for p in files if p.is_file()}
    err = _fails(["train", f"--run-dir={finished_run}", "--resume", "--epochs=2", *bad], capsys)
    assert re.search(message, err), err
    assert sorted((finished_run / "checkpoints").rglob("*")) == files
    assert {p: p.read_bytes() for p in files if p.is_file()} == before


PYRAMID_DATA = "synthetic:direction:img=32:train=64:val=32:test=32"
PYRAMIDS = {"pvt_tiny": ["--sr-ratios=4,2,1,1"], "swin_tiny": ["--window-size=2"]}
"""Four one-block stages of widths 8-16 (stride 16: grids 16, 8, 4, 2 at 32x32), each host's own option."""


@pytest.mark.parametrize("preset", PYRAMIDS)
def test_pyramid_hosts_train_resume_and_eval_from_the_command_line(preset, tmp_path, capsys):
    sizes = [
        "--patch-size=2",
        "--depths=1,1,1,1",
        "--embed-dims=8,16,16,16",
        "--num-heads=1,2,2,2",
        "--mlp-ratios=2,2,2,2",
    ]
    full, cut = tmp_path / "full", tmp_path / "cut"
    train = ["train", f"--model={preset}", *sizes, *PYRAMIDS[preset], f"--data={PYRAMID_DATA}", *FAST, "--epochs=2"]
    assert main([*train, "--keep-checkpoints=2", f"--run-dir={full}"]) == 0  # 2 steps per epoch
    saved = yaml.safe_load((full / "config.yaml").read_text())["model"]
    assert (
        saved["arch"] == preset.split("_")[0]
        and saved["depths"] == [1, 1, 1, 1]
        and saved["embed_dims"] == [8, 16, 16, 16]
    )
    # pretend the run died after its first epoch: its config and that checkpoint alone, then resume
    (cut / "checkpoints").mkdir(parents=True)
    (full / "config.yaml").rename(cut / "config.yaml")
    (full / "checkpoints" / "step-00000002").rename(cut / "checkpoints" / "step-00000002")
    assert main(["train", f"--run-dir={cut}", "--resume"]) == 0
    rows = {
        run.name: [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] for run in (full, cut)
    }
    assert [r["epoch"] for r in rows["cut"]] == [1, 2]
    assert without_times(rows["cut"]) == without_times(rows["full"])  # resuming loses nothing
    finished = [load_training_checkpoint(run, with_state=False).weights for run in (full, cut)]
    assert all(torch.equal(finished[0][k], finished[1][k]) for k in finished[0])
    capsys.readouterr()
    assert main(["eval", f"--checkpoint={cut}", "--resolutions=32,48x32"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| Model | Params | 32(%) | 48x32(%) |" and lines[4].startswith("| cut | ")


def test_model_options_are_the_hosts_own(tmp_path, capsys):
    err = _fails(["train", "--model=swin_tiny", "--depth=2", f"--data={PYRAMID_DATA}"], capsys)
    assert "unknown model option(s) depth for arch='swin'" in err and "depths" in err and "window_size" in err
    err = _fails(["train", "--model=thesis_vit", "--depths=1,1", f"--data={DATA}"], capsys)
    assert "unknown model option(s) depths for arch='vit'" in err and "depth," in err
    err = _fails(["train", "--model=pvt_tiny", "--depths=1,1", f"--data={PYRAMID_DATA}"], capsys)
    assert "one entry per stage" in err
    args = build_parser().parse_args(["train", "--num-heads=3", "--embed-dims=8,16"])
    assert args.num_heads == 3 and args.embed_dims == (8, 16)
    assert build_parser().parse_args(["train", "--num-heads=1,2"]).num_heads == (1, 2)


def test_a_config_without_a_preset_picks_the_host_by_arch(tmp_path):
    config = tmp_path / "swin.yaml"
    model = {
        "arch": "swin",
        "patch_size": 2,
        "depths": [1, 1],
        "embed_dims": [8, 16],
        "num_heads": [1, 2],
        "mlp_ratios": [2.0, 2.0],
        "window_size": 2,
        "relative": "swin",
    }
    config.write_text(yaml.safe_dump({"model": model, "train": {"data": PYRAMID_DATA}}))
    cfg, _, _ = RunRequest.from_yaml(config).resolve()
    assert type(cfg).__name__ == "SwinConfig" and cfg.arch == "swin" and cfg.depths == (1, 1)
    assert cfg.position.relative == "swin" and cfg.num_classes == 2 and cfg.img_size == 32  # the data's
    assert (
        type(RunRequest(model={"depth": 1, "patch_size": 4}, train={"data": DATA}).resolve()[0]).__name__ == "ViTConfig"
    )
