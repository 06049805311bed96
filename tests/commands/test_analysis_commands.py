"""The analysis commands: each runs on a tiny model, prints its numbers and writes its files."""

import json

import pytest

from vitpos.cli import main

from ..analysis.test_plots import assert_png

TINY_ARGS = ["--img-size", "32", "--depth", "1", "--head", "gap"]
PYRAMID_ARGS = {
    arch: [
        "--model",
        f"{arch}_tiny",
        "--img-size",
        "64",
        "--patch-size",
        "2",
        "--embed-dims",
        "8,16,24,32",
        "--depths",
        "1,1,1,1",
        "--num-heads",
        "1,2,3,4",
        *extra,
    ]
    for arch, extra in (("pvt", ["--sr-ratios", "4,2,1,1"]), ("swin", ["--window-size", "4"]))
}
"""Tiny four-stage hosts through the command line: grids 32, 16, 8, 4 at 64x64, one block per stage."""
GRIDS = [[32, 32], [16, 16], [8, 8], [4, 4]]
SMALL = ["--img-size", "32"]
"""Grids 16, 8, 4, 2 instead, for the commands that plot whole attention matrices."""


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
    (stage,) = json.loads((tmp_path / "similarity.json").read_text())["stages"]
    assert (
        stage["references"] == [[0, 0], [4, 4]] and stage["grid"] == [8, 8] and set(stage["locality"]) == {"absolute"}
    )


def test_attention(tmp_path, capsys):
    assert main(["attention", *TINY_ARGS, "--images", "2", "--out", str(tmp_path)]) == 0
    assert "uniform attention" in capsys.readouterr().out
    assert_png(tmp_path / "attention_matrix.png")
    assert_png(tmp_path / "attention_queries.png")
    (stage,) = json.loads((tmp_path / "attention.json").read_text())["stages"]
    distances = stage["mean_attention_distance"]
    assert len(distances) == 1 and len(distances[0]) == 4 and stage["grid"] == [8, 8]


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
    assert (
        main(["buckets", "--grid", "9x7", "--methods", "product,cross", "--refs", "4,3", "--out", str(tmp_path)]) == 0
    )
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
    assert (
        main(
            [
                "train",
                "--model",
                "thesis_vit",
                "--absolute",
                "learned",
                "--data",
                "synthetic:absolute:train=64:val=16:test=16",
                "--epochs",
                "1",
                "--batch-size",
                "32",
                "--run-dir",
                str(run),
                "--no-progress",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "attention",
                "--checkpoint",
                str(run),
                "--data",
                "synthetic:absolute:test=8",
                "--images",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert_png(out / "attention_queries.png")
    assert main(["probe", "--checkpoint", str(run), "--out", str(out)]) == 0
    assert "absolute" in json.loads((out / "probe.json").read_text())
    assert main(["probe", "--checkpoint", str(run), "--absolute", "sincos2d", "--out", str(out)]) == 2
    assert "--checkpoint fixes the model; drop --absolute" in capsys.readouterr().err


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_probe_on_a_pyramid(arch, tmp_path, capsys):
    assert main(["probe", *PYRAMID_ARGS[arch], "--absolute", "sincos2d", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "probe.json").read_text())
    assert list(result) == ["stage 3 absolute"] and result["stage 3 absolute"]["grid"] == [4, 4]
    assert result["stage 3 absolute"]["left_right"] == 1.0 and result["stage 3 absolute"]["up_down"] == 1.0
    again = ["probe", *PYRAMID_ARGS[arch], "--absolute", "sincos2d", "--stage", "2", "--out", str(tmp_path)]
    assert main([*again, "--force"]) == 0
    assert json.loads((tmp_path / "probe.json").read_text())["stage 2 absolute"]["grid"] == [8, 8]
    assert_png(tmp_path / "probe.png")


def test_table_analyses_of_a_host_without_table_name_the_option(tmp_path, capsys):
    # swin_tiny has no absolute table: its position is the relative bias
    assert main(["similarity", *PYRAMID_ARGS["swin"], "--out", str(tmp_path)]) == 2
    assert "no absolute position table (absolute='none')" in (err := capsys.readouterr().err) and "--absolute" in err
    assert main(["probe", *PYRAMID_ARGS["pvt"], "--stage", "4", "--out", str(tmp_path)]) == 2
    assert "stage 4 does not exist: the model has 4 stage(s)" in capsys.readouterr().err
    assert main(["probe", *TINY_ARGS, "--depths", "1,1", "--out", str(tmp_path)]) == 2
    assert "--depths does not apply to --model thesis_vit (a vit host)" in capsys.readouterr().err


def test_similarity_of_every_stage(tmp_path, capsys):
    args = [*PYRAMID_ARGS["pvt"], *SMALL, "--absolute", "sincos2d", "--join", "shared", "--refs", "0,0;1,1"]
    assert main(["similarity", *args, "--out", str(tmp_path)]) == 0
    stages = json.loads((tmp_path / "similarity.json").read_text())["stages"]
    assert [s["grid"] for s in stages] == [[16, 16], [8, 8], [4, 4], [2, 2]]
    for s in stages:  # a fixed sinusoidal table: neighbours are more alike than cells in general
        assert set(s["locality"]) == {"absolute", "block 0"} and s["locality"]["absolute"] > 0
        assert_png(tmp_path / f"similarity_stage{s['stage']}.png")


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_attention_per_stage(arch, tmp_path, capsys):
    assert main(["attention", *PYRAMID_ARGS[arch], *SMALL, "--images", "2", "--out", str(tmp_path)]) == 0
    stages = json.loads((tmp_path / "attention.json").read_text())["stages"]
    assert [s["grid"] for s in stages] == [[16, 16], [8, 8], [4, 4], [2, 2]]
    assert [len(s["mean_attention_distance"][0]) for s in stages] == [1, 2, 3, 4]  # heads per stage
    if arch == "pvt":  # keys reduced by 4, 2, 1, 1
        assert [s["key_stride"] for s in stages] == [4, 2, 1, 1]
    else:  # a query reaches at most the far corner of its 4x4 window
        assert all(d <= 3 * 2**0.5 for s in stages for d in s["mean_attention_distance"][0])
        assert stages[0]["uniform_distance"] > 5
    for s in range(4):
        assert_png(tmp_path / f"attention_matrix_stage{s}.png")
        assert_png(tmp_path / f"attention_queries_stage{s}.png")


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_equivariance_on_a_pyramid(arch, tmp_path, capsys):
    # no table, and windows that cover every grid: every stage moves with the image
    extra = ["--window-size", "32", "--relative", "none"] if arch == "swin" else []
    assert (
        main(
            [
                "equivariance",
                *PYRAMID_ARGS[arch],
                *extra,
                "--absolute",
                "none",
                "--shift",
                "1,-2",
                "--margin",
                "0",
                "--images",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "equivariance.json").read_text())
    assert len(result["stage_errors"]) == 4 and max(result["stage_errors"]) < 1e-5 and result["logit_change"] < 1e-5
    assert "per stage" in capsys.readouterr().out
    assert_png(tmp_path / "equivariance.png")


@pytest.mark.parametrize("arch", ["pvt", "swin"])
def test_awareness_on_a_chosen_stage(arch, tmp_path, capsys):
    assert (
        main(
            [
                "awareness",
                *PYRAMID_ARGS[arch],
                "--absolute",
                "sincos2d",
                "--images",
                "4",
                "--folds",
                "2",
                "--stage",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert set(json.loads((tmp_path / "awareness.json").read_text())) == {"block 0"}  # an earlier stage: no final norm
    again = ["awareness", *PYRAMID_ARGS[arch], "--images", "4", "--folds", "2", "--out", str(tmp_path), "--force"]
    assert main(again) == 0
    assert set(json.loads((tmp_path / "awareness.json").read_text())) == {"block 0", "final"}
    assert_png(tmp_path / "awareness.png")


def test_relative_bias_on_swin_windows(tmp_path, capsys):
    assert (
        main(["relative-bias", *PYRAMID_ARGS["swin"], "--images", "2", "--per-side", "2", "--out", str(tmp_path)]) == 0
    )
    blocks = json.loads((tmp_path / "relative_bias.json").read_text())["blocks"]
    assert list(blocks) == [f"stage {s} block 0" for s in range(4)]
    assert all(b["grid"] == [4, 4] for b in blocks.values())  # one window
    assert_png(tmp_path / "relative_bias_stage2_block0.png")
    assert (
        main(["relative-bias", *PYRAMID_ARGS["swin"], "--stage", "1", "--block", "1", "--out", str(tmp_path / "b")])
        == 2
    )
    assert (
        "block 1 of stage 1 does not exist; the model has 4 layers with a relative encoding: stage 0 block 0,"
        in capsys.readouterr().err
    )


def test_relative_bias_says_when_its_tables_are_untrained(tmp_path, capsys):
    args = ["relative-bias", *TINY_ARGS, "--relative", "irpe:product:ctx:k", "--images", "2", "--per-side", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert "are all zero" in (out := capsys.readouterr().out) and "--checkpoint RUN" in out
    assert main(["relative-bias", "--out", str(tmp_path / "b")]) == 2  # the documented default, thesis_vit, has none
    assert "--checkpoint RUN" in (err := capsys.readouterr().err) and "--relative" in err


def test_a_message_names_the_option_as_its_reader_sets_it(tmp_path, capsys):
    import vitpos
    from vitpos.analysis.tables import NoPositionTableError, absolute_table

    with pytest.raises(NoPositionTableError) as python_side:
        absolute_table(vitpos.create_model("thesis_vit", absolute="none"))
    assert "(absolute=NAME)" in str(python_side.value) and "--absolute" not in str(python_side.value)
    assert main(["probe", *TINY_ARGS, "--absolute", "none", "--out", str(tmp_path)]) == 2
    assert "(--absolute NAME)" in (err := capsys.readouterr().err) and "absolute=NAME" not in err
