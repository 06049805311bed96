"""Deployed = evaluated: ``load_deployed(...).predict`` on an image feeds the model exactly what ``vitpos eval``
fed it, for a synthetic task (images resized whole) and a photograph folder (resized and centre-cropped)."""

from pathlib import Path

import pytest
import torch
from PIL import Image

import vitpos.commands.eval as eval_command
from vitpos.cli import main
from vitpos.data import open_data
from vitpos.deploy import load_deployed

from .photos import photo_folder

TINY = ["--model=thesis_vit", "--patch-size=4", "--embed-dim=32", "--depth=1", "--num-heads=2", "--head=gap"]
FAST = ["--epochs=1", "--batch-size=8", "--warmup-epochs=0", "--no-progress"]


def _what_eval_fed(run: Path, monkeypatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The inputs and outputs of the model in `vitpos eval --checkpoint run`, in the order of the split."""
    inputs, outputs = [], []
    load = eval_command.load_model

    def record(module, args, output) -> None:
        inputs.append(args[0])
        outputs.append(output)

    def spied(*args, **kwargs):
        model, saved = load(*args, **kwargs)
        model.register_forward_hook(record)
        return model, saved

    monkeypatch.setattr(eval_command, "load_model", spied)
    assert (
        main(["eval", f"--checkpoint={run}", "--batch-size=5", "--no-progress", f"--out={run.parent / 'e.json'}"]) == 0
    )
    return torch.cat(inputs), torch.cat(outputs)


def _deployed(run: Path, size: int):
    out = run.parent / "model.pt2"
    assert main(["export", f"--checkpoint={run}", f"--min-size={size}", f"--max-size={2 * size}", str(out)]) == 0
    return load_deployed(out)


def _check(run: Path, images: list[Image.Image], size: int, monkeypatch) -> None:
    fed, scored = _what_eval_fed(run, monkeypatch)
    deployed = _deployed(run, size)
    prepared = torch.stack([deployed.data_config.preprocess(img) for img in images])
    assert torch.equal(prepared, fed)  # the very inputs eval gave the model
    torch.testing.assert_close(deployed.predict(images), scored, atol=1e-5, rtol=1e-5)
    assert torch.equal(deployed.predict(images), deployed(fed))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_synthetic_runs_deployment_sees_what_eval_saw(tmp_path, monkeypatch):
    spec = "synthetic:direction:img=16:train=16:val=8:test=8"
    run = tmp_path / "run"
    assert main(["train", *TINY, "--img-size=16", f"--data={spec}", *FAST, f"--run-dir={run}"]) == 0
    test = open_data(spec).test
    images = []
    for i in range(len(test)):  # each test image as a user has it: a PNG file
        test.open_sample(i)[0].save(tmp_path / f"{i}.png")
        images.append(Image.open(tmp_path / f"{i}.png"))
    _check(run, images, 16, monkeypatch)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_photo_folder_runs_deployment_sees_what_eval_saw(tmp_path, monkeypatch):
    photos = photo_folder(tmp_path / "photos", per_class=2, held=2)
    run = tmp_path / "run"
    argv = ["train", *TINY, "--img-size=32", f"--data=folder:{photos}", *FAST, "--eval-crop=0.8", f"--run-dir={run}"]
    assert main(argv) == 0
    images = [Image.open(path) for path, _ in open_data(f"folder:{photos}").test.samples]  # JPEGs, opened lazily
    _check(run, images, 32, monkeypatch)
