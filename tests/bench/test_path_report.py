"""The quick check's path rows: which paths each case is timed on, their table, and the rows of the CUDA
policy's table that the fastest paths propose."""

from __future__ import annotations

import json

from bench import quick_report
from bench.gpu.path_report import path_table, proposed_rows, table_lines
from bench.gpu.path_rows import KINDS, PATH_CASES, contenders
from vitpos.attention import policy


def row(case: str, path: str, tokens: int, overhead: float, fastest: bool = False, default: bool = False) -> dict:
    return {
        "part": "overhead", "tokens": tokens, "batch": 64, "case": case, "kind": KINDS[case], "path": path,
        "default": default, "fastest": fastest, "first_call_s": 2.5, "images_per_s": 100.0, "overhead": overhead,
        "overhead_low": overhead - 0.01, "overhead_high": overhead + 0.01, "peak_bytes": 2**30, "peak_ratio": 1.1,
    }  # fmt: skip


ROWS = [
    row("iRPE bias product", "sdpa", 784, 0.65, default=True),
    row("iRPE bias product", "triton", 784, 0.04, fastest=True),
    row("iRPE bias product", "flex", 784, 0.10),
    row("Swin bias", "sdpa", 784, 0.55, default=True),
    row("Swin bias", "triton", 784, 0.06),
    row("Swin bias", "stored", 784, 0.05, fastest=True),  # timed on one bias case only: not a contender
    row("iRPE ctx qkv", "chunked", 196, 1.2, default=True),
    row("iRPE ctx qkv", "triton", 196, 0.2, fastest=True),
    row("RoPE 2-D", "eager", 196, 0.31, default=True),
    row("RoPE 2-D", "compiled", 196, 0.02, fastest=True),
]


def test_every_case_is_timed_on_every_path_that_can_compute_it():
    assert {c.label for c in PATH_CASES} == set(KINDS) and set(KINDS.values()) < set(policy.KINDS)
    by_label = {c.label: c for c in PATH_CASES}
    assert contenders(by_label["iRPE ctx k"], 196, True) == ["sdpa", "stored", "triton", "flex"]
    assert contenders(by_label["iRPE ctx k"], 784, True) == ["sdpa", "chunked", "triton", "flex"]
    assert contenders(by_label["Shaw"], 196, True) == ["stored", "triton"]  # a value term: no SDPA, no flex
    assert contenders(by_label["RoPE 2-D"], 784, True) == ["eager", "compiled"]
    assert contenders(by_label["RoPE 2-D"], 784, False) == ["eager"]


def test_the_fastest_complete_path_per_kind_and_token_range_is_proposed():
    proposed = proposed_rows(ROWS)
    assert {key: path for key, (path, _) in proposed.items()} == {
        ("bias", "bfloat16", "long"): "triton",  # largest overhead 6% against sdpa's 65%; flex, stored incomplete
        ("values", "bfloat16", "short"): "triton",
        ("rotation", "bfloat16", "short"): "compiled",
    }
    evidence = proposed[("bias", "bfloat16", "long")][1]
    assert evidence == "Swin bias: sdpa +55.0%, triton +6.0%; iRPE bias product: sdpa +65.0%, triton +4.0%"
    lines = table_lines(ROWS, "rows.json")
    assert lines[1] == '("bias", "bfloat16", "long"): "triton",  # ' + evidence
    assert all(key[0] in policy.KINDS and key[2] in ("short", "long") for key in proposed)


def test_the_path_table_marks_the_default_and_the_fastest():
    lines = path_table(ROWS[:2])
    assert (
        lines[2]
        == "| 784 | 64 | iRPE bias product | sdpa | yes | 2.5 s | 100.0 | +65.0% (+64.0% to +66.0%) | 1.00 GiB ×1.10 |"
    )
    assert lines[3].startswith("| 784 | 64 | iRPE bias product | **triton** (fastest) |  | 2.5 s |")


def test_the_report_prints_the_proposed_rows(tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"rows": ROWS, "device": "NVIDIA H100", "command": "python -m bench.gpu --quick"}))
    assert quick_report.main([str(path), "--table"]) == 0
    out = capsys.readouterr().out
    assert '("rotation", "bfloat16", "short"): "compiled",  # RoPE 2-D: eager +31.0%, compiled +2.0%' in out
    assert quick_report.main([str(path)]) == 0
    assert '- `("values", "bfloat16", "short"): "triton"`' in capsys.readouterr().out
