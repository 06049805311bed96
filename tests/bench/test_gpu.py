"""The GPU benchmark's logic that needs no GPU: its cases, its report, its place in BENCHMARKS.md."""

from pathlib import Path

import torch

from bench import gpu
from bench.cases import BASELINE, CASES
from bench.gpu.report import (
    NOT_MEASURED,
    GpuGroup,
    GpuRow,
    gpu_cases,
    gpu_groups,
    gpu_section,
    path_cases,
    render_path_table,
    render_section,
    render_table,
    replace_section,
)


def test_every_slot_value_at_both_lengths_in_both_modes_eager_and_compiled():
    groups = gpu_groups()
    assert {(g.tokens, g.mode, g.compiled) for g in groups} == {
        (t, m, c) for t in (196, 784) for m in ("train", "infer") for c in (False, True)
    }
    cases = gpu_cases()
    assert cases[0] is BASELINE and {c.label for c in cases} == {c.label for c in CASES if c.available()}
    assert gpu_groups((196,), (False,)) == [GpuGroup(196, "train", False), GpuGroup(196, "infer", False)]


def test_a_table_shows_overheads_and_memory_against_the_baseline():
    rows = [
        GpuRow("no PE", 1000.0, (0.0, 0.0, 0.0), 2 * 2**30),
        GpuRow("RoPE 2-D", 900.0, (0.111, 0.1, 0.12), 3 * 2**30),
    ]
    lines = render_table(GpuGroup(784, "train", True), rows, "no PE")
    assert lines[0] == "### 784 tokens, training step, compiled"
    assert "| no PE | 1000.0 | baseline | 2.00 GiB ×1.00 |" in lines
    assert "| RoPE 2-D | 900.0 | +11.1% (+10.0% to +12.0%) | 3.00 GiB ×1.50 |" in lines
    section = render_section("NVIDIA H100", "2.13.0", "python -m bench.gpu", 256, [lines])
    assert section.startswith("## GPU\n") and "- Device: NVIDIA H100; torch 2.13.0" in section
    assert "`python -m bench.gpu`" in section


def test_every_bucketed_term_is_timed_on_the_fused_path_and_the_others():
    pairs = path_cases()
    terms = {case.label for case, _ in pairs}
    assert terms == {"iRPE bias product", "iRPE ctx k", "iRPE ctx qk", "iRPE ctx qkv", "Swin bias"}
    for term in terms:
        assert {path for case, path in pairs if case.label == term} == {
            "sdpa", "flex", "flex_gathered", "stored", "chunked", "triton", "triton_stored"
        }  # fmt: skip


def test_the_path_table_sets_the_fused_path_against_the_fastest_other():
    rows = [
        GpuRow("no PE", 1000.0, (0.0, 0.0, 0.0), 2 * 2**30),
        GpuRow("iRPE ctx k · triton", 950.0, (0.05, 0.04, 0.06), 2 * 2**30),
        GpuRow("iRPE ctx k · flex", 760.0, (0.3, 0.2, 0.4), 3 * 2**30),
        GpuRow("iRPE ctx k · stored", 475.0, (1.1, 1.0, 1.2), 4 * 2**30),
    ]
    lines = render_path_table(GpuGroup(196, "train", False), rows, "no PE")
    assert lines[0] == "### 196 tokens, training step, eager: every path of the bucketed terms"
    assert lines[2].endswith("| peak memory | time × best other path |")
    assert "| iRPE ctx k · triton | 950.0 | +5.0% (+4.0% to +6.0%) | 2.00 GiB ×1.00 | ×0.80 (flex) |" in lines
    assert "| iRPE ctx k · flex | 760.0 | +30.0% (+20.0% to +40.0%) | 3.00 GiB ×1.50 |  |" in lines


def test_the_gpu_section_is_replaced_in_place_or_appended():
    cpu = "# Benchmarks\n\n## Slot values\n\n| a |\n"
    with_gpu = replace_section(cpu, NOT_MEASURED)
    assert with_gpu.startswith(cpu) and gpu_section(with_gpu) == NOT_MEASURED
    measured = "## GPU\n\n- Device: X\n"
    middle = replace_section(with_gpu + "\n## Later\n\ntext\n", measured)
    assert gpu_section(middle) == measured and middle.endswith("## Later\n\ntext\n") and middle.startswith(cpu)
    assert gpu_section(cpu) is None


def test_without_cuda_it_says_so_and_measures_nothing(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu.main([]) == 2
    assert "no CUDA device is available here" in capsys.readouterr().err


def test_benchmarks_md_has_a_gpu_section():
    section = gpu_section(Path("BENCHMARKS.md").read_text())
    assert section == NOT_MEASURED or "- Device: " in section  # never a figure without its device
