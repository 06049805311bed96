"""The analysis commands: each runs on a tiny model, prints its numbers and writes its files."""

import json

import pytest

from vitpos.cli import main

from ..analysis.test_plots import assert_png

TINY_ARGS = ["--img-size", "32", "--depth", "1", "--head", "gap"]


def test_probe(tmp_path, capsys):
    assert main(["probe", *TINY_ARGS, "--absolute", "sincos2d", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "left/right" in out and "absolute" in out
    result = json.loads((tmp_path / "probe.json").read_text())["absolute"]
    assert result["left_right"] == 1.0 and result["up_down"] == 1.0
    assert_png(tmp_path / "probe.png")


def test_probe_without_table_is_a_clear_error(tmp_path, capsys):
    assert main(["probe", *TINY_ARGS, "--absolute", "none", "--out", str(tmp_path)]) == 2
    assert "no absolute position table (absolute='none')" in capsys.readouterr().err


def test_similarity(tmp_path, capsys):
    assert main(["similarity", *TINY_ARGS, "--absolute", "fourier", "--refs", "0,0;4,4", "--out", str(tmp_path)]) == 0
    assert "locality" in capsys.readouterr().out
    assert_png(tmp_path / "similarity.png")
    assert json.loads((tmp_path / "similarity.json").read_text())["references"] == [[0, 0], [4, 4]]


def test_attention(tmp_path, capsys):
    assert main(["attention", *TINY_ARGS, "--images", "2", "--out", str(tmp_path)]) == 0
    assert "uniform attention" in capsys.readouterr().out
    assert_png(tmp_path / "attention_matrix.png")
    assert_png(tmp_path / "attention_queries.png")
    distances = json.loads((tmp_path / "attention.json").read_text())["mean_attention_distance"]
    assert len(distances) == 1 and len(distances[0]) == 4


def test_equivariance(tmp_path, capsys):
    assert main(["equivariance", *TINY_ARGS, "--absolute", "none", "--shift", "2,-1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "equivariance.json").read_text())
    assert result["feature_error"] < 1e-5 and result["logit_change"] < 1e-5
    # a roll of any size keeps a model without an absolute table equivariant
    assert set(result["sweep"]) == {"down", "right", "diagonal"} and len(result["sweep"]["down"]) == 4
    assert all(r["feature_error"] < 1e-5 for rows in result["sweep"].values() for r in rows)
    assert_png(tmp_path / "equivariance.png")


@pytest.mark.parametrize("shift", ["1", "a,b"])
def test_equivariance_bad_shift(shift, capsys):
    with pytest.raises(SystemExit):
        main(["equivariance", "--shift", shift])
    assert "must look like 'rows,cols'" in capsys.readouterr().err


def test_awareness(tmp_path, capsys):
    assert main(["awareness", *TINY_ARGS, "--absolute", "sincos2d", "--images", "8", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "awareness.json").read_text())
    assert set(result) == {"block 0", "final"}
    assert 0.0 <= result["final"]["cell_accuracy"] <= 1.0
    assert_png(tmp_path / "awareness.png")


def test_buckets(tmp_path, capsys):
    assert main(["buckets", "--grid", "9x7", "--methods", "product,cross", "--refs", "4,3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "product" in out and "cross" in out
    assert_png(tmp_path / "buckets.png")
    counts = json.loads((tmp_path / "buckets.json").read_text())["methods"]
    assert counts["product"]["buckets"] == 49 and counts["cross"]["buckets"] == 14


def test_buckets_bad_grid(capsys):
    with pytest.raises(SystemExit):
        main(["buckets", "--grid", "14by14"])
    assert "must look like '14x14'" in capsys.readouterr().err


def test_relative_bias(tmp_path, capsys):
    args = ["relative-bias", *TINY_ARGS, "--relative", "swin", "--absolute", "none", "--images", "2", "--per-side", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert_png(tmp_path / "relative_bias_block0.png")
    assert "block 0" in json.loads((tmp_path / "relative_bias.json").read_text())["blocks"]


def test_relative_bias_without_relative_encoding(tmp_path, capsys):
    assert main(["relative-bias", *TINY_ARGS, "--relative", "none", "--images", "2", "--out", str(tmp_path)]) == 2
    assert "no relative encoding" in capsys.readouterr().err


def test_analysis_of_a_trained_checkpoint_on_data(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--model", "thesis_vit", "--absolute", "learned", "--data", "synthetic:absolute:train=64:val=16:test=16",
                 "--epochs", "1", "--batch-size", "32", "--run-dir", str(run), "--no-progress", "--device", "cpu"]) == 0
    out = tmp_path / "out"
    assert main(["attention", "--checkpoint", str(run), "--data", "synthetic:absolute:test=8", "--images", "4", "--out", str(out)]) == 0
    assert_png(out / "attention_queries.png")
    assert main(["probe", "--checkpoint", str(run), "--out", str(out)]) == 0
    assert "absolute" in json.loads((out / "probe.json").read_text())
    assert main(["probe", "--checkpoint", str(run), "--absolute", "sincos2d", "--out", str(out)]) == 2
    assert "--checkpoint fixes the model; drop --absolute" in capsys.readouterr().err
