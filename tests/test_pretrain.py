"""Pretraining a position encoding on direction4 then distance (thesis §5.1), and its command."""

import json
import re

import pytest
import torch

import vitpos
from vitpos.analysis.probes import probe_table
from vitpos.analysis.tables import absolute_table
from vitpos.cli import build_parser, main
from vitpos.engine import TrainConfig
from vitpos.models.saved_encoding import load_position_encoding, read_position_metadata
from vitpos.pretrain import pretrain_position_encoding
from vitpos.study.families import DEFAULT_FAMILIES
from vitpos.study.protocol import StudyConfig

SMALL = dict(embed_dim=32, num_heads=2, mlp_ratio=2.0)


def test_pretraining_changes_the_encoding_and_records_probes(tmp_path):
    cfg = vitpos.get_config("thesis_vit", absolute="fourier", **SMALL)
    train_cfg = TrainConfig(epochs=1, batch_size=32, lr=5e-3, seed=3, progress=False, device="cpu")
    result = pretrain_position_encoding(cfg, tmp_path / "pe.safetensors", train_cfg, size=64, probe_folds=3)
    assert set(result.test) == {"direction4", "distance"} and "acc1" in result.test["direction4"]
    torch.manual_seed(3)
    fresh = vitpos.create_model(cfg)
    assert result.before == probe_table(absolute_table(fresh), (8, 8), folds=3, seed=3)
    meta = read_position_metadata(result.path)
    assert (
        meta["notes"]["tasks"] == ["direction4", "distance"] and meta["notes"]["probes_after"] == result.after.to_dict()
    )
    loaded = vitpos.create_model(cfg)
    load_position_encoding(loaded, result.path)
    assert not torch.equal(
        loaded.stages[0].absolute.wr.weight, fresh.stages[0].absolute.wr.weight
    )  # trained, not the initial weights


def test_bad_tasks_are_a_clear_error(tmp_path):
    cfg = vitpos.get_config("thesis_vit", absolute="fourier", **SMALL)
    with pytest.raises(ValueError, match="one or more synthetic tasks from direction"):
        pretrain_position_encoding(cfg, tmp_path / "x.safetensors", TrainConfig(), tasks=("jigsaw",))


def test_command(tmp_path, capsys):
    out = tmp_path / "pe.safetensors"
    args = [
        "pretrain-pe",
        "--absolute",
        "learnable_sincos",
        "--size",
        "64",
        "--epochs",
        "1",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "before" in text and "after" in text
    # one epoch on 64 images learns nothing: the last line says so instead of offering the file
    last = text.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"wrote {out} \(\d+ s\), but its pretraining learned too little to use \(direction4 at chance: its best "
        r"validation acc1 [\d.]+% is within 10 points of chance \(25% for 4 classes\); distance at chance: .*\): "
        r"try more --epochs or --size, or another --lr",
        last,
    ), last
    assert "--init-pe" not in last and set(json.loads(out.with_suffix(".json").read_text())["at_chance"]) == {
        "direction4",
        "distance",
    }
    # each metric names its split; accuracies in %, losses and R² as plain numbers; probe scores 0 to 1
    assert re.search(r"direction4 test split: loss [\d.]+  acc1 [\d.]+%$", text, re.M), text
    assert re.search(r"distance +test split: loss [\d.]+  r2 -?[\d.]+$", text, re.M), text
    assert re.search(r"^after +[01]\.\d{3} +[01]\.\d{3} +-?[\d.]+$", text, re.M), text  # probe scores, as `probe`
    assert json.loads(out.with_suffix(".json").read_text())["path"] == str(out)
    assert read_position_metadata(out)["absolute"] == "learnable_sincos"


def test_the_defaults_are_the_studys_pretraining_which_learns():
    """Fourier's own defaults (gamma 10, no output scale) sit at chance on the thesis's grid (docs/study.md)."""
    args = build_parser().parse_args(["pretrain-pe"])
    pretrained = next(family for family in DEFAULT_FAMILIES if family.pretrained)
    assert args.absolute == pretrained.slots["absolute"] == "fourier:gamma=2:scale=10"
    assert (args.lr, args.epochs) == (StudyConfig().lr, StudyConfig().pretrain_epochs) == (0.002, 20)
