"""``python -m bench.gpu --quick`` on the CPU with tiny sizes: its rows, its budget, its references."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from bench import gpu, quick_report
from bench.gpu import check as gpu_check
from bench.gpu.check import TOLERANCE, check_rows, expected, measure, plan
from bench.gpu.check_layers import CheckCase, CheckShape, check_cases
from bench.gpu.path_rows import KINDS, PATH_CASES, contenders
from bench.gpu.report import gpu_cases, gpu_section
from bench.quick_log import Budget, RowLog
from bench.quick_report import HEADING, NOT_RUN, render
from vitpos.attention import PATHS

TINY_SHAPE = CheckShape(side=4, dim=8, heads=2, batch=2, window=2)
FEW_CASES = [
    CheckCase("irpe:cross:ctx:qkv:unshared"),
    CheckCase("xl"),
    CheckCase("swin", "shifted"),
    CheckCase("irpe:product:ctx:qkv", "padded"),
]
TINY_ARGS = [
    "--quick", "--device", "cpu",
    "--model", "deit_tiny_patch16_224", "--model-args", "depth=1,embed_dim=32,num_heads=2",
    "--tokens", "4", "--batch", "2", "--repeats", "1", "--iters", "1", "--no-compile",
    "--check-side", "4", "--check-dim", "8", "--check-heads", "2", "--check-window", "2", "--ensemble-members", "1",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: more threads only contend
    yield
    torch.set_num_threads(threads)


def rows_of(path) -> dict:
    return json.loads(path.read_text())


def test_every_bucketed_encoding_is_checked_on_every_path():
    labels = {c.label for c in check_cases()}
    for method in ("euclidean", "quant", "cross", "product"):
        assert {f"irpe:{method}:bias:qk", f"irpe:{method}:bias:qk:unshared"} <= labels
        assert {f"irpe:{method}:ctx:q", f"irpe:{method}:ctx:k:unshared", f"irpe:{method}:ctx:v"} <= labels
        assert f"irpe:{method}:ctx:qkv:unshared" in labels
    assert {"shaw", "xl", "huang", "sasa", "swin (shifted)", "irpe:product:ctx:qkv (padded)"} <= labels
    assert {path for dtype, path in plan() if dtype == "float32"} == {None, *PATHS}
    assert {path for dtype, path in plan() if dtype == "bfloat16"} == {None, "triton", "triton_stored"}


def test_every_path_equals_the_float64_reference_on_the_cpu(tmp_path):
    log = RowLog(tmp_path / "rows.json", {})
    check_rows(TINY_SHAPE, torch.device("cpu"), Budget(600, {"correctness": 1}), log, FEW_CASES)
    rows = rows_of(tmp_path / "rows.json")["rows"]
    assert len(rows) == len(FEW_CASES) * len(plan()) * 2
    assert all(r["pass"] for r in rows), [r for r in rows if not r["pass"]]
    assert {(r["case"], r["path"], r["precision"], r["call"]) for r in rows} == {
        (c.label, p or "policy", d, call) for c in FEW_CASES for d, p in plan() for call in (1, 2)
    }
    took = {(r["case"], r["path"]): r["took"] for r in rows}
    assert took[("xl", "stored")] == "stored" and took[("xl", "explicit")] == "explicit"
    assert took[("xl", "flex")] != "flex"  # FlexAttention has no backward on the CPU: the policy's path ran


@pytest.mark.parametrize("case", [CheckCase("irpe:quant:ctx:kv:unshared"), CheckCase("swin", "shifted")])
def test_a_wrong_table_fails_the_check(case):
    ref = expected(case, TINY_SHAPE)
    layer = copy.deepcopy(ref.layer).float()
    assert measure(ref, case, TINY_SHAPE, layer, torch.device("cpu"), "float32")["pass"]
    with torch.no_grad():
        table = next(layer.relative.parameters())
        table.add_(torch.randn_like(table) * 0.05)
    result = measure(ref, case, TINY_SHAPE, layer, torch.device("cpu"), "float32")
    assert not result["pass"] and max(result["output_error"], result["gradient_error"]) > TOLERANCE["float32"]


def test_the_quick_check_runs_every_part_on_the_cpu(tmp_path, capsys):
    path, markdown = tmp_path / "quick.json", tmp_path / "BENCH.md"
    markdown.write_text("# Benchmarks\n\n## GPU quick check\n\nold\n\n## Later\n\nkept\n")
    args = [*TINY_ARGS, "--check-cases", "swin (shifted),irpe:product:bias:qk (padded)", "--json", str(path)]
    assert gpu.main([*args, "--out", str(markdown)]) == 0
    data = rows_of(path)
    assert data["finished"] and data["command"].startswith("python -m bench.gpu --quick")
    assert data["device"].startswith("CPU") and data["torch"] == torch.__version__
    by_part: dict[str, list[dict]] = {}
    for row in data["rows"]:
        by_part.setdefault(row["part"], []).append(row)
    assert len(by_part["correctness"]) == 2 * len(plan()) * 2 and all(r["pass"] for r in by_part["correctness"])
    overhead = by_part["overhead"]
    paths = [r for r in overhead if "path" in r]
    assert [(r["case"], r["path"]) for r in paths] == [
        (c.label, p) for c in PATH_CASES for p in contenders(c, 4, compiled=False)
    ]  # every path that computes a step, none compiled (--no-compile): no FlexAttention, an eager rotation
    for case in PATH_CASES:
        rows = [r for r in paths if r["case"] == case.label]
        assert sum(r["fastest"] for r in rows) == 1 and all(r["first_call_s"] > 0 for r in rows)
        assert [r["path"] for r in rows if r["default"]] == ["eager" if case.label == "RoPE 2-D" else "stored"]
        assert all(r["took"] == r["path"] for r in rows if case.label != "RoPE 2-D")  # no fallback
    others = [r for r in overhead if "path" not in r]
    assert [r["case"] if "case" in r else r["skipped"] for r in others] == [
        c.label if c.label != "PEG at 0-5" else "4 tokens: PEG at 0-5" for c in gpu_cases() if c.label not in KINDS
    ]  # the one-block test model has no block 5
    assert "do not exist in a model of depth 1" in others[5]["reason"]
    overhead = [r for r in overhead if "case" in r]
    assert all(r["tokens"] == 4 and r["took"] != "?" for r in overhead)
    (compiled,) = by_part["compiled"]
    assert compiled["against"] == "vitpos deit_tiny_patch16_224 no PE" and compiled["compiled"] is False
    (swin,) = by_part["swin"]
    assert swin["skipped"] and "timm" in swin["reason"]
    assert by_part["ensemble"][-1]["skipped"] == "the compiled step (default)"  # part (vii): its own test file
    (augment,) = by_part["augment"]
    assert augment["images_per_s"] > 0 and augment["train_step_images_per_s"] == overhead[0]["images_per_s"]
    data_cases = [r["case"] for r in by_part["data"]]
    assert data_cases == [
        "bare step",
        "as run (folder)",
        "as run (shards)",
        "augmentation",
        "loading (folder)",
        "loading (shards)",
        "where the time goes",
    ]
    assert all(r["images_per_s"] > 0 for r in by_part["data"][:-1])
    assert "% of the bare step" in by_part["data"][-1]["summary"]
    out = capsys.readouterr()
    assert f"correctness: {2 * len(plan()) * 2} calls checked, 0 failed" in out.out
    assert "s left] overhead: 4 tokens, iRPE ctx k · stored: " in out.err
    assert '("contextual", "bfloat16", "short"): "' in out.out  # the policy rows the fastest paths propose
    text = markdown.read_text()
    assert text.startswith("# Benchmarks\n\n## GPU quick check\n\n- Device: CPU") and text.endswith(
        "## Later\n\nkept\n"
    )
    assert "\nold\n" not in text and "cut short" not in text
    assert "| policy | float32 | 4 | 0 |" in text and "| flex | float32 | 4 | 0 |" in text
    assert "| 4 | 2 | learned | sdpa |" in text
    assert {"| 4 | 2 | iRPE ctx k | stored | yes |", "| 4 | 2 | iRPE ctx k | **stored** (fastest) | yes |"} & {
        line[: line.index("yes |") + 5] for line in text.splitlines() if "| yes |" in line
    }
    assert '- `("values", "bfloat16", "short"): "' in text
    assert "- swin: skipped swin_tiny against timm swin_tiny_patch4_window7_224: timm does not import here" in text
    assert "### The DeiT recipe end to end (folder and shards)" in text and "Where the time goes: as run" in text


def test_a_spent_budget_skips_every_part_and_says_so(tmp_path, capsys):
    path = tmp_path / "quick.json"
    assert gpu.main([*TINY_ARGS, "--budget", "0", "--json", str(path)]) == 0
    rows = rows_of(path)["rows"]
    assert [r["part"] for r in rows] == ["correctness", "overhead", "compiled", "swin", "augment", "data", "ensemble"]
    assert all("skipped" in r for r in rows)
    assert rows[0]["skipped"] == len(check_cases()) * len(plan())
    assert "correctness: time spent" in capsys.readouterr().err


def test_only_the_parts_asked_for_run(tmp_path):
    path = tmp_path / "quick.json"
    assert gpu.main([*TINY_ARGS, "--parts", "swin,compiled", "--json", str(path)]) == 0
    assert [r["part"] for r in rows_of(path)["rows"]] == ["compiled", "swin"]


def test_a_run_cut_short_keeps_the_rows_measured_before(tmp_path, monkeypatch):
    calls = []
    real = gpu_check.measure

    def measure_then_stop(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(gpu_check, "measure", measure_then_stop)
    path = tmp_path / "quick.json"
    with pytest.raises(KeyboardInterrupt):
        gpu.main([*TINY_ARGS, "--check-cases", "shaw", "--json", str(path)])
    data = rows_of(path)
    assert not data["finished"] and "- The run was cut short" in render(data)
    assert [(r["case"], r["path"], r["call"], r["pass"]) for r in data["rows"]] == [
        ("shaw", "policy", 1, True),
        ("shaw", "policy", 2, True),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-args", "depth"], "--model-args takes key=value pairs"),
        (["--check-side", "5", "--check-window", "2"], "must be a multiple of Swin's window"),
        (["--check-cases", "nope"], "unknown check case 'nope'; valid cases: irpe:euclidean:bias:qk"),
        (["--parts", "swin,nope"], "unknown part 'nope'; parts: correctness, overhead, compiled, swin, augment, data"),
    ],
)
def test_bad_quick_options_name_what_to_change(args, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        gpu.main([*TINY_ARGS, *args, "--json", str(tmp_path / "q.json")])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "q.json").exists()


def test_the_report_refuses_a_file_that_holds_no_rows(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    assert quick_report.main([str(other)]) == 2
    assert "holds no quick run's rows" in capsys.readouterr().err
    assert quick_report.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read the rows of" in capsys.readouterr().err


def test_benchmarks_md_has_a_quick_check_section():
    section = gpu_section(Path("BENCHMARKS.md").read_text(), HEADING)
    assert section == NOT_RUN or "- Device: " in section  # never a figure without its device
