"""The path rows of the quick check (:mod:`bench.path_rows`) as a markdown table, and the rows of the
CUDA policy's table (:data:`vitpos.attention.policy.CUDA_TABLE`) that their fastest paths propose."""

from __future__ import annotations

from typing import Any

from vitpos.attention.policy import token_range

DTYPE = "bfloat16"
"""The dtype the quick check's steps compute in (bf16 autocast), the dtype of the rows it proposes."""


def _percent(row: dict[str, Any]) -> str:
    return f"{row['overhead']:+.1%} ({row['overhead_low']:+.1%} to {row['overhead_high']:+.1%})"


def _peak(row: dict[str, Any]) -> str:
    peak = "" if row.get("peak_bytes") is None else f"{row['peak_bytes'] / 2**30:.2f} GiB"
    return peak + ("" if row.get("peak_ratio") is None else f" ×{row['peak_ratio']:.2f}")


def path_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per token count, case and path: default or not, the first call, images/s, overhead, peak memory,
    the case's fastest in bold."""
    lines = [
        "| tokens | batch | case | path | default | first call | img/s | overhead (min to max) | peak memory |",
        "| --- | --- | --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        path = f"**{r['path']}** (fastest)" if r["fastest"] else r["path"]
        cells = [
            str(r["tokens"]), str(r["batch"]), r["case"], path, "yes" if r["default"] else "",
            f"{r['first_call_s']:.1f} s", f"{r['images_per_s']:.1f}", _percent(r), _peak(r),
        ]  # fmt: skip
        lines.append(f"| {' | '.join(cells)} |")
    return [*lines, ""]


def proposed_rows(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[str, str]]:
    """{(kind, dtype, token range): (path, evidence)}: per kind of term and token range, the path whose
    largest overhead over the cases of that kind is least, among the paths timed on every one of them."""
    groups: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in rows:
        per_path = groups.setdefault((r["kind"], token_range(r["tokens"])), {})
        per_path.setdefault(r["path"], {})[r["case"]] = r["overhead"]
    proposed = {}
    for (kind, tokens), per_path in groups.items():
        cases = set().union(*(set(by_case) for by_case in per_path.values()))
        complete = {path: by_case for path, by_case in per_path.items() if set(by_case) == cases}
        if not complete:
            continue
        best = min(complete, key=lambda path: max(complete[path].values()))
        evidence = "; ".join(
            f"{case}: " + ", ".join(f"{path} {by_case[case]:+.1%}" for path, by_case in complete.items())
            for case in sorted(cases)
        )
        proposed[(kind, DTYPE, tokens)] = (best, evidence)
    return proposed


def table_lines(rows: list[dict[str, Any]], source: str) -> list[str]:
    """The proposed rows as Python lines to paste into ``CUDA_TABLE``, each with its evidence."""
    proposed = proposed_rows(rows)
    if not proposed:
        return [f"# {source}: no case was timed on every path; nothing to propose"]
    lines = [f"# proposed by the path rows of {source} (bf16 training step over no PE)"]
    for (kind, dtype, tokens), (path, evidence) in sorted(proposed.items()):
        lines.append(f'("{kind}", "{dtype}", "{tokens}"): "{path}",  # {evidence}')
    return lines
