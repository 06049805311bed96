"""``python -m bench.gpu --session``: its plan within 540 s, its imports, its term rows on a CPU, the parts'
deadlines, its report section, and the policy rows and pinned tiles its JSON proposes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench import gpu, quick_report
from bench.cases import BASELINE
from bench.gpu import session_terms
from bench.gpu.path_report import pinned_lines
from bench.gpu.session import SESSION_SECONDS, _run_until, section_writer, session_plan
from bench.gpu.session_part import run_part
from bench.quick_log import RowLog
from bench.quick_settings import QuickSettings
from vitpos.attention import policy

ROOT = Path(__file__).parents[2]
LACKING = ("pycocotools", "kornia", "scipy", "sklearn", "matplotlib")


def test_the_dry_run_prints_every_part_in_order_and_a_total_within_540_s(capsys):
    assert gpu.main(["--session", "--dry-run"]) == 0
    out = capsys.readouterr().out
    parts = session_plan((196, 784))
    assert [p.name for p in parts] == ["terms-196", "terms-784", "study", "data", "correctness"]
    assert sum(p.seconds for p in parts) <= SESSION_SECONDS == 540
    heads = [line for line in out.splitlines() if line[:1].isdigit()]
    assert [line.split()[1] for line in heads] == [p.name for p in parts]
    assert [float(line.split()[2]) for line in heads] == [round(p.seconds) for p in parts]
    assert out.rstrip().endswith("total 540 s (limit 540 s)")
    assert "     iRPE ctx k · triton_stored" in out and "     Swin bias · flex_gathered" in out


def test_the_floor_comes_first_then_every_term_on_every_path_and_variant():
    plan = session_terms.term_plan(196)
    assert plan[0] == (BASELINE, "triton")
    by_case: dict[str, list[str]] = {}
    for case, path in plan[1:]:
        by_case.setdefault(case.label, []).append(path)
    assert list(by_case)[:3] == ["iRPE ctx k", "iRPE bias product", "Swin bias"]
    assert by_case["iRPE ctx k"] == ["sdpa", "stored", "triton", "triton_stored", "flex"]
    assert by_case["Swin bias"] == ["sdpa", "stored", "triton", "triton_stored", "flex", "flex_gathered"]
    assert by_case["iRPE ctx qkv"] == ["stored", "triton", "triton_stored"]  # a value term: no SDPA, no flex
    assert by_case["RoPE 2-D"] == ["eager", "compiled"]
    paths_784 = {p for _, p in session_terms.term_plan(784)}
    assert "chunked" in paths_784 and "stored" not in paths_784  # from the chunking length on


def test_the_session_imports_nothing_the_gpu_machine_lacks():
    code = (
        "import json, sys, bench.gpu, bench.gpu.session, bench.gpu.session_part, bench.gpu.session_terms; "
        f"print(json.dumps([m for m in {LACKING!r} if m in sys.modules]))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.fixture
def tiny() -> QuickSettings:
    args = {"depth": 1, "embed_dim": 32, "num_heads": 2}
    return QuickSettings(device=torch.device("cpu"), model_args=args, batch=2, repeats=2, iters=1)


def test_the_terms_part_times_each_contender_after_its_first_call(tiny, tmp_path, monkeypatch):
    """iRPE ctx k on every path but flex (whose CPU compile takes minutes), the fused kernels as PyTorch here."""
    monkeypatch.setattr(session_terms, "ORDER", ("iRPE ctx k",))
    monkeypatch.setattr(session_terms, "contenders", lambda case, tokens: ["sdpa", "stored", "triton", "triton_stored"])
    path = tmp_path / "session.json"
    RowLog(path, {"device": "cpu", "command": "test"})
    assert run_part("terms-16", tiny, path, "", 300.0) == 0
    rows = json.loads(path.read_text())["rows"]
    assert rows[0]["case"] == "no PE" and rows[0]["first_call_s"] > 0  # the baseline's first call
    timed = [r for r in rows if "path" in r]
    assert [(r["case"], r["path"]) for r in timed] == [("no PE", "triton")] + [
        ("iRPE ctx k", p) for p in ("sdpa", "stored", "triton", "triton_stored")
    ]
    assert timed[0]["kind"] == "floor" and {r["kind"] for r in timed[1:]} == {"contextual"}
    for r in timed:
        assert r["took"] == r["path"] and r["step"] == "train"
        assert r["first_call_s"] > 0 and r["warm_step_s"] == pytest.approx(2 / r["images_per_s"])
    assert sum(r["default"] for r in timed[1:]) == 1  # the policy's path (stored on a CPU)


def test_a_spent_part_writes_a_skipped_row_per_contender(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(session_terms, "ORDER", ("Shaw",))
    path = tmp_path / "session.json"
    RowLog(path, {"device": "cpu", "command": "test"})
    assert run_part("terms-16", tiny, path, "", 0.0) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [r["skipped"] for r in rows] == [f"16 tokens: {c.label} · {p}" for c, p in session_terms.term_plan(16)]


def test_a_part_past_its_deadline_is_ended():
    start = time.monotonic()
    assert _run_until([sys.executable, "-c", "import time; time.sleep(60)"], 1.0) is None
    assert time.monotonic() - start < 30
    assert _run_until([sys.executable, "-c", "raise SystemExit(3)"], 60.0) == 3


def row(case: str, kind: str, path: str, overhead: float, step: str = "train") -> dict:
    return {
        "part": "overhead", "tokens": 196, "batch": 256, "case": case, "kind": kind, "path": path, "step": step,
        "default": path == "sdpa", "first_call_s": 9.0, "images_per_s": 1000.0, "overhead": overhead,
        "overhead_low": overhead - 0.01, "overhead_high": overhead + 0.01, "peak_bytes": None, "peak_ratio": None,
    }  # fmt: skip


ROWS = [
    row("no PE", "floor", "triton", 0.01),  # the floor proposes nothing
    row("iRPE ctx k", "contextual", "sdpa", 0.60),
    row("iRPE ctx k", "contextual", "triton", 0.09),
    row("iRPE ctx k", "contextual", "triton_stored", 0.05),
    row("iRPE ctx k", "contextual", "flex", 0.01, step="infer"),  # an inference step proposes nothing
    row("iRPE ctx qk", "contextual", "sdpa", 0.70),
    row("iRPE ctx qk", "contextual", "triton", 0.12),
    row("iRPE ctx qk", "contextual", "triton_stored", 0.10),
]


def written_policy(path: Path, monkeypatch: pytest.MonkeyPatch):
    """The policy module loaded from ``path`` (a written copy of vitpos/attention/policy.py)."""
    spec = importlib.util.spec_from_file_location("vitpos.attention.policy_written", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def test_the_table_writes_the_measured_rows_into_the_policy(tmp_path, capsys, monkeypatch):
    rows = tmp_path / "session.json"
    tuning = {"part": "tuning", "gpu": [9, 0], "kernel": "_forward_kernel", "config": 1, "key": []}
    rows.write_text(json.dumps({"rows": [*ROWS, tuning], "device": "NVIDIA H100", "command": "x"}))
    target = tmp_path / "policy.py"
    target.write_text(Path(policy.__file__).read_text())
    for _ in range(2):  # a second write replaces the rows of the first
        assert quick_report.main([str(rows), "--table", "--policy", str(target)]) == 0
    out = capsys.readouterr().out
    assert "PINNED = {(9, 0): {'_forward_kernel': 1}}" in out
    written = written_policy(target, monkeypatch)
    measured = {key: path for key, path in written.CUDA_TABLE.items() if key[1] != "*"}
    assert measured == {("contextual", "bfloat16", "short"): "triton_stored"}
    assert target.read_text().count('("contextual", "bfloat16", "short")') == 1
    assert written.table_path("contextual", torch.bfloat16, 196) == "triton_stored"
    assert written.table_path("contextual", torch.float32, 196) == "sdpa"  # the "*" row for other dtypes


def test_the_table_refuses_a_file_without_the_measured_rows(tmp_path, capsys):
    rows = tmp_path / "session.json"
    rows.write_text(json.dumps({"rows": ROWS, "device": "NVIDIA H100", "command": "x"}))
    target = tmp_path / "policy.py"
    target.write_text("CUDA_TABLE = {}\n")
    assert quick_report.main([str(rows), "--table", "--policy", str(target)]) == 2
    assert "no single block of measured rows" in capsys.readouterr().err
    assert target.read_text() == "CUDA_TABLE = {}\n"


def test_a_kernel_is_pinned_only_where_every_shape_chose_one_configuration():
    tunings = [
        {"gpu": [9, 0], "kernel": "_forward_kernel", "config": 0},
        {"gpu": [9, 0], "kernel": "_forward_kernel", "config": 0},
        {"gpu": [9, 0], "kernel": "_backward_q_kernel", "config": 0},
        {"gpu": [9, 0], "kernel": "_backward_q_kernel", "config": 1},
    ]
    lines = pinned_lines(tunings)
    assert lines[0].startswith("PINNED = {(9, 0): {'_forward_kernel': 0}}")
    assert lines[1] == "# the autotuner chose by shape (left to the autotune): _backward_q_kernel on (9, 0)"


def test_the_section_is_rewritten_after_every_row(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    log = RowLog(tmp_path / "s.json", {"device": "NVIDIA H100", "command": "python -m bench.gpu --session"})
    log.on_write = section_writer(str(out))
    log.add(ROWS[2])
    text = out.read_text()
    assert "## Other\n\nkept" in text and "## GPU session" in text and "| iRPE ctx k | **triton** (fastest)" in text
    log.add(ROWS[3])
    assert out.read_text().count("## GPU session") == 1 and "**triton_stored** (fastest)" in out.read_text()
