"""Checkpoints, outputs and parameter counts written by earlier hosts still hold (fixtures/legacy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

import vitpos
from vitpos.models.factory import config_from_dict, create_model

LEGACY = Path(__file__).parent.parent / "fixtures" / "legacy"
COUNTS = json.loads((LEGACY / "param_counts.json").read_text())


def test_every_legacy_fixture_has_its_preset() -> None:
    # the detectors, segmenters and later hosts (compact, ...) came after the fixtures were written
    assert set(COUNTS) <= set(vitpos.list_models(task="classification"))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_parameter_count_is_unchanged(name: str) -> None:
    with torch.device("meta"):
        model = create_model(name)
    assert sum(p.numel() for p in model.parameters()) == COUNTS[name]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_legacy_checkpoint_loads_and_gives_the_same_float64_output(name: str) -> None:
    file = LEGACY / f"{name}.safetensors"
    with safe_open(file, "pt") as f:
        cfg = config_from_dict(json.loads(f.metadata()["model_config"]))
    model = create_model(cfg).double().eval()
    vitpos.load_weights(model, file, resample=False)
    io = load_file(LEGACY / f"{name}.io.safetensors")
    with torch.no_grad():
        logits = model(io["input"])
    torch.testing.assert_close(logits, io["logits"], rtol=1e-12, atol=1e-12)
