"""The study end to end at a reduced size: every default family, the report, resuming, refusing."""

import json

import pytest

from vitpos.models.factory import get_config
from vitpos.study import DEFAULT_FAMILIES, Family, StudyConfig, StudyFolderError, parse_family, run_study
from vitpos.study import redgreen as study_run
from vitpos.study.report import report_from_results

from ..analysis.test_plots import assert_png

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(**overrides) -> StudyConfig:
    # one round, and no second cap: these tests keep their size (the rounds and the longer cap are tested below)
    settings = dict(
        seeds=1,
        rounds=1,
        extend=1,
        train_size=64,
        val_size=32,
        test_size=32,
        efficiency_sizes=(32,),
        resolutions=(24, 32),
        epochs=1,
        batch_size=32,
        pretrain_size=64,
        pretrain_epochs=1,
        probe_folds=3,
        efficiency_families=None,
        lr_grid=(),
        model=get_config("thesis_vit", embed_dim=32, num_heads=2, mlp_ratio=2.0),
    )
    return StudyConfig(**{**settings, **overrides})


def test_default_families_end_to_end(tmp_path):
    logs = []
    report = run_study(tiny(lr_grid=(1e-3, 3e-3)), tmp_path, log=logs.append)
    text = report.read_text()
    for section in ("Tables 1, 3, 4", "Table 2", "Fig. 3", "Resolution generalisation", "Fig. 5", "## Setup"):
        assert section in text
    for family in DEFAULT_FAMILIES:
        assert f"| {family.label} |" in text
    for image in ("efficiency_direction", "efficiency_distance", "resolution", "similarity"):
        assert f"figures/{image}.png" in text
        assert_png(tmp_path / "figures" / f"{image}.png")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["finished_cells"] == results["total_cells"] == 9 * 6
    assert (
        isinstance(results["cells"][0]["cpu_seconds"], float) and len(results["wall_seconds"]) == 1
    )  # recorded, one invocation
    for label, summary in results["summary"].items():
        direction = summary["tasks"]["direction@64"]
        assert 0.0 <= direction["mean"] <= 1.0 and direction["n"] == 1
        assert summary["tasks"]["distance@64"]["mean"] <= 1.0
        assert set(summary["resolution"]) == {"24", "32"}
        has_table = parse_family(label).has_table
        assert bool(summary["probes"]) == has_table
        for key, stat in summary["probes"].items():
            assert stat["mean"] <= 1.0 and (key.endswith("distance_r2") or stat["mean"] >= 0.0)
    assert (tmp_path / "pretrained" / "fourier_pretrained.safetensors").is_file()
    assert text.index("## Verdicts") < text.index("## Location tasks")  # the report opens with the verdicts
    assert len(results["verdicts"]) > 20 and all(v["n"] == 1 for v in results["verdicts"])
    assert "| learned learns left/right | thesis Table 1 | 99.43 ± 0.36 |" in text
    assert "figures/claims_thesis_table_4.png" in text
    (tmp_path / "report.md").unlink()
    assert report_from_results(tmp_path).read_text() == text  # reproduces from results.json alone
    assert any("pretraining" in line for line in logs) and any("[  54/54]" in line for line in logs)
    rates = json.loads((tmp_path / "rates.json").read_text())
    assert len(rates) == 8  # fourier_pretrained shares fourier's selection
    for cell in results["cells"]:
        assert cell["lr"] in (1e-3, 3e-3) and cell["steps"] >= 1 and isinstance(cell["flagged"], bool)
    assert "## Convergence" in text and "| direction lr |" in text
    assert sum(line.startswith("projected wall time: ~") for line in logs) == 1


def test_an_interrupted_study_continues_without_redoing_cells(tmp_path, monkeypatch):
    config = tiny(families=(parse_family("sincos2d"), parse_family("peg")))
    real, calls, interrupted = study_run.run_cells, [], []

    def flaky(cells, *args, **kwargs):
        calls.extend(cells)
        if len(calls) >= 5 and not interrupted:
            interrupted.append(cells)
            raise InterruptedError("stopped by the user")
        return real(cells, *args, **kwargs)

    monkeypatch.setattr(study_run, "run_cells", flaky)
    with pytest.raises(InterruptedError):
        run_study(config, tmp_path, log=lambda _: None)
    assert json.loads((tmp_path / "results.json").read_text())["finished_cells"] == 4  # report of what finished
    first = set(calls[:4])
    calls.clear()
    run_study(config, tmp_path, log=lambda _: None)
    assert len(calls) == 12 - 4 and not first & set(calls)
    assert json.loads((tmp_path / "results.json").read_text())["finished_cells"] == 12


def test_a_rerun_repeats_every_number_whatever_the_worker_count(tmp_path):
    """One thread per run on a CPU: the same cells, rates and stopping epochs with one process or two."""
    families = (parse_family("learned"), parse_family("irpe_product"))
    config = tiny(families=families, efficiency_sizes=(), epochs=3, lr_grid=(1e-3, 3e-3))
    run_study(config, tmp_path / "one", workers=1, log=lambda _: None)
    run_study(config, tmp_path / "two", workers=2, log=lambda _: None)
    runs = [json.loads((tmp_path / name / "results.json").read_text())["cells"] for name in ("one", "two")]
    timeless = [[{k: v for k, v in c.items() if "seconds" not in k} for c in cells] for cells in runs]
    assert timeless[0] == timeless[1]
    assert (tmp_path / "one" / "rates.json").read_text() == (tmp_path / "two" / "rates.json").read_text()


def test_a_folder_with_other_settings_is_refused(tmp_path):
    config = tiny(families=(parse_family("sincos2d"),), efficiency_sizes=())
    run_study(config, tmp_path, log=lambda _: None)
    with pytest.raises(StudyFolderError, match="other settings \\(epochs\\)"):
        run_study(tiny(families=config.families, efficiency_sizes=(), epochs=2), tmp_path, log=lambda _: None)
    with pytest.raises(StudyFolderError, match="family sincos2d"):
        run_study(
            tiny(families=(parse_family("sincos2d: absolute=sincos1d"),), efficiency_sizes=()),
            tmp_path,
            log=lambda _: None,
        )
    more = tiny(families=(*config.families, parse_family("none")), efficiency_sizes=(), seeds=2)  # may grow
    run_study(more, tmp_path, log=lambda _: None)


def test_missing_families_are_skipped_and_named(tmp_path):
    logs = []
    config = tiny(families=(parse_family("sincos2d"), Family("t5", {"relative": "t5"})), efficiency_sizes=())
    report = run_study(config, tmp_path, log=logs.append)
    assert "skipping family t5: relative=t5" in logs[0]
    assert "t5 (relative=t5)" in report.read_text()


def test_stacked_ensembles_give_the_results_of_one_model_at_a_time(tmp_path):
    """Seeds and tasks of a family train as one ensemble, iRPE's included (its attention takes the explicit
    path under vmap), its learning-rate trials too (one stack per family, each member at its rate), and
    end where training them one at a time ends."""
    config = tiny(
        families=(parse_family("sincos2d"), parse_family("irpe_product")),
        seeds=2,
        efficiency_sizes=(),
        lr_grid=(2e-3, 5e-3),
        extend=2,  # a run at its cap trains again on the longer one: in the stack as alone
    )
    logs = []
    run_study(config, tmp_path / "stacked", ensemble=True, log=logs.append)
    run_study(config, tmp_path / "alone", ensemble=False, log=lambda _: None)
    assert not any("one model at a time" in line for line in logs)
    assert (
        "16 training runs: 0 already done, 16 to go in 2 jobs" in logs[0]
    )  # one ensemble per family: all seeds, tasks
    stacked, alone = (
        json.loads((tmp_path / name / "results.json").read_text())["cells"] for name in ("stacked", "alone")
    )
    for a, b in zip(stacked, alone, strict=True):
        assert (a["family"], a["task"], a["seed"]) == (b["family"], b["task"], b["seed"])
        assert a["test"] == pytest.approx(b["test"], abs=1e-5)
    trials = [json.loads((tmp_path / name / "rates.json").read_text()) for name in ("stacked", "alone")]
    for key, tasks in trials[1].items():
        for task, entry in tasks.items():
            if task != "family":
                for lr, by_seed in entry["trials"].items():
                    for seed, ref in by_seed.items():
                        got = trials[0][key][task]["trials"][lr][seed]
                        assert got["steps"] == ref["steps"] and got["val"] == pytest.approx(ref["val"], abs=1e-5)
    assert (
        len([line for line in logs if line.startswith("  rate trial")]) == 2 * 3 * 2 * 2
    )  # families, training tasks, rates, trial seeds
    longer = [c for c in stacked if c["extended_from"] is not None]
    assert longer and all(c["steps"] > c["extended_from"] or c["stop"] == "solved" for c in longer)  # trained again


def test_pyramid_families_end_to_end(tmp_path):
    tiny_host = "embed_dims=8,32 num_heads=1,2 mlp_ratios=2,2"
    families = (
        parse_family(f"pvt_sin: host=pvt absolute=sincos2d {tiny_host}"),
        parse_family(f"swin_rel: host=swin {tiny_host}"),
    )
    report = run_study(tiny(families=families, efficiency_sizes=()), tmp_path, log=lambda _: None).read_text()
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["finished_cells"] == results["total_cells"] == 2 * 4
    pvt, swin = results["summary"]["pvt_sin"], results["summary"]["swin_rel"]
    # the probes read the last stage's table: a fixed sinusoidal one, on the study model's 8x8 grid
    assert (
        pvt["probes"]["direction/before/left_right"]["mean"]
        == pvt["probes"]["direction/after/left_right"]["mean"]
        == 1.0
    )
    assert not swin["probes"]  # Swin's position is its relative bias: no table to probe
    assert set(pvt["resolution"]) == set(swin["resolution"]) == {"24", "32"}
    assert "| pvt_sin | `host=pvt, absolute=sincos2d, embed_dims=8,32, num_heads=1,2, mlp_ratios=2,2` |" in report
    assert (
        "- family swin_rel: the swin host, 2 stages of 1, 1 block(s), widths 8, 32, grids 16x16, 8x8, gap head"
        in report
    )
    (tmp_path / "report.md").unlink()
    assert report_from_results(tmp_path).read_text() == report  # the families come back from results.json


def test_cct_family_end_to_end(tmp_path):
    family = parse_family("cct_lape: host=cct join=lape embed_dim=32 num_heads=2 mlp_ratio=2")
    run_study(tiny(families=(family,), efficiency_sizes=()), tmp_path, log=lambda _: None)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["finished_cells"] == results["total_cells"] == 4
    summary = results["summary"]["cct_lape"]
    assert set(summary["resolution"]) == {"24", "32"}  # the convolutional tokenizer takes both sizes
    assert summary["probes"]  # the learned table on the study model's grid is probed


def test_the_projection_divides_the_trainings_among_the_workers():
    from vitpos.study.run import projection

    assert projection(12.0, 10, 10, 2).startswith("projected wall time: ~1.0 min for 10 trainings in 10 jobs, 2 at")
    assert projection(30.0, 2, 2, 4).startswith("projected wall time: ~0.5 min for 2 trainings in 2 jobs")  # 2 at once
    assert projection(1.0, 90, 1, 4).startswith("projected wall time: ~1.5 min for 90 trainings in 1 jobs")  # a stack


def test_compile_reaches_every_stack_and_only_the_red_green_study_takes_it(tmp_path, monkeypatch, capsys):
    """``--compile`` hands each stack's step to torch.compile (here recorded, not compiled: the compiled step's
    equality with the eager one is tests/engine/test_stacked_step.py's); the dense studies refuse it."""
    from vitpos.cli import main
    from vitpos.commands import study as command
    from vitpos.engine import stacked_step
    from vitpos.study.cells import Cell
    from vitpos.study.execute import run_trials
    from vitpos.study.plan import JobOptions

    modes = []
    monkeypatch.setattr(stacked_step, "_GRAPHS", {})  # no graph from another test to share
    monkeypatch.setattr(stacked_step.torch, "compile", lambda fn, mode, backend, **_: modes.append(mode) or fn)
    family = parse_family("sincos2d")
    config = tiny(families=(family,), efficiency_sizes=(), resolutions=())
    cells = [Cell("sincos2d", task, 64, 0) for task in ("direction", "distance")]
    trials = run_trials([(cells[0], 2e-3), (cells[0], 5e-3)], family, config, ensemble=True, compile=True)
    assert len(trials) == 2 and modes == [None]  # one stack; on a CPU the default mode
    job = JobOptions("cpu", ensemble=True, extras=False, compile=True)
    assert set(study_run.RedGreenStudy(config).run_cells(cells, family, job)) == set(cells) and modes == [None] * 2
    assert stacked_step.compiled_graphs() == 2  # the trials' and the cells' stacks differ in their tasks
    calls = []
    monkeypatch.setattr(command, "run_study", lambda *args, **kwargs: calls.append(kwargs))
    assert main(["study", "--compile", "--device", "cpu", "--out", str(tmp_path / "s")]) == 0
    assert calls[0]["compile"] is True and calls[0]["command"].startswith("vitpos study --compile")
    assert main(["study", "--task", "detect", "--compile", "--out", str(tmp_path / "d")]) == 2
    assert "--task detect takes --seeds" in capsys.readouterr().err
