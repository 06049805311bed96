"""Every command on a trained detector (DETR) and segmenter (Semantic FPN) run: it runs or refuses by name."""

import json

import pytest
import torch
from torch import nn

import vitpos
from vitpos.cli import main
from vitpos.deploy import load_deployed
from vitpos.tasks.detection.model import batch_first_attention

from ..analysis.test_plots import assert_png

FPN_CONFIG = """model:
  embed_dims: [8, 16, 16, 16]
  depths: [1, 1, 1, 1]
  num_heads: [1, 1, 1, 1]
  mlp_ratios: [2, 2, 2, 2]
  fpn_dim: 16
  head_dim: 8
  norm_groups: 4
"""
"""A 64-px Semantic FPN small enough to train in a second: stage grids 16, 8, 4, 2."""

TRAIN = ["--epochs", "1", "--batch-size", "8", "--no-progress", "--device", "cpu"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A DETR with iRPE in its encoder and a PVT Semantic FPN, each trained for two steps."""
    root = tmp_path_factory.mktemp("task_runs")
    (root / "fpn.yaml").write_text(FPN_CONFIG)
    detr = ["--model", "detr_tiny_sine_irpe_ctx", "--data", "synthetic:detect:train=16:val=8:test=8"]
    fpn = ["--config", str(root / "fpn.yaml"), "--model", "pvt_tiny_fpn", "--img-size", "64"]
    fpn += ["--data", "synthetic:segment:train=16:val=8:test=8"]
    for name, args in (("detr", detr), ("fpn", fpn)):
        assert main(["train", *args, *TRAIN, "--run-dir", str(root / name)]) == 0
    return {"detr": root / "detr", "fpn": root / "fpn"}


ANALYSES = {
    "probe": ("probe.json", "probe.png"),
    "similarity": ("similarity.json",),
    "attention": ("attention.json",),
    "equivariance": ("equivariance.json", "equivariance.png"),
    "awareness": ("awareness.json", "awareness.png"),
}


@pytest.mark.parametrize("command", sorted(ANALYSES))
@pytest.mark.parametrize("run", ["detr", "fpn"])
def test_every_analysis_runs_on_a_detector_and_a_segmenter(runs, run, command, tmp_path, capsys):
    # the last grid (2x2) is too small for a probe, and has no interior cell a margin away from its border
    extra = {"probe": ["--stage", "1"], "equivariance": ["--margin", "0"]}.get(command, []) if run == "fpn" else []
    extra += ["--images", "2"] if command in ("attention", "equivariance") else []
    assert main([command, "--checkpoint", str(runs[run]), *extra, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    if run == "fpn":
        assert "analysing the pvt host of this SemanticFPN" in out
    for name in ANALYSES[command]:
        assert (tmp_path / name).is_file()
        if name.endswith(".png"):
            assert_png(tmp_path / name)


def test_equivariance_of_a_detector_compares_features_not_its_boxes(runs, tmp_path):
    assert main(["equivariance", "--checkpoint", str(runs["detr"]), "--images", "2", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "equivariance.json").read_text())
    assert result["logit_change"] is None and 0 < result["feature_error"] < 10


def test_relative_bias_of_a_detector_and_the_refusal_of_a_segmenter_without_one(runs, tmp_path, capsys):
    args = ["--images", "2", "--per-side", "3", "--out", str(tmp_path)]
    assert main(["relative-bias", "--checkpoint", str(runs["detr"]), *args]) == 0
    assert "block 0" in json.loads((tmp_path / "relative_bias.json").read_text())["blocks"]
    assert main(["relative-bias", "--checkpoint", str(runs["fpn"]), *args, "--force"]) == 2
    assert "no relative encoding" in capsys.readouterr().err


@pytest.mark.parametrize(("run", "sizes"), [("detr", (16, 48)), ("fpn", (64, 128))])
def test_export_of_a_detector_and_a_segmenter_equals_the_eager_model(runs, run, sizes, tmp_path):
    out = tmp_path / "model.pt2"
    low, high = sizes
    assert (
        main(["export", "--checkpoint", str(runs[run]), "--min-size", str(low), "--max-size", str(high), str(out)]) == 0
    )
    eager, _ = vitpos.load_model(runs[run])
    deployed = load_deployed(out)
    for batch, side in ((1, low), (3, high)):
        x = torch.randn(batch, 3, side, side)
        with torch.no_grad():
            want, got = eager(x), deployed(x)
        if run == "detr":
            for key in ("pred_logits", "pred_boxes"):
                torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-5)
        else:
            assert got.shape == (batch, eager.num_classes, side, side)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_export_of_a_segmenter_names_the_smallest_size_it_can_take(runs, tmp_path, capsys):
    args = ["export", "--checkpoint", str(runs["fpn"]), "--min-size", "32", "--max-size", "64", str(tmp_path / "m.pt2")]
    assert main(args) == 2
    assert "grid of one cell" in (err := capsys.readouterr().err) and "use --min-size 64" in err


@pytest.mark.parametrize(("same_inputs", "padded"), [(True, False), (False, False), (False, True)])
def test_batch_first_attention_is_multihead_attention(same_inputs, padded):
    torch.manual_seed(0)
    layer = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        layer.in_proj_bias.normal_()
        layer.out_proj.bias.normal_()
    query = torch.randn(3, 5, 16)
    key = query if same_inputs else torch.randn(3, 7, 16)
    value = query if same_inputs else torch.randn(3, 7, 16)
    padding = torch.arange(key.shape[1]) >= torch.tensor([[7], [4], [1]]) if padded else None  # True: ignored
    want = layer(query, key, value, key_padding_mask=padding, need_weights=False)[0]
    got = batch_first_attention(layer, query, key, value, key_padding_mask=padding)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
