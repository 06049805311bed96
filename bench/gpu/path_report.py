"""The path rows of the quick check (:mod:`bench.gpu.path_rows`) as a markdown table, and the rows of the
CUDA policy's table (:data:`vitpos.attention.policy.CUDA_TABLE`) that their fastest paths propose."""

from __future__ import annotations

from typing import Any

from vitpos.attention.policy import KINDS, token_range

DTYPE = "bfloat16"
"""The dtype the quick check's steps compute in (bf16 autocast), the dtype of the rows it proposes."""


def _percent(row: dict[str, Any]) -> str:
    return f"{row['overhead']:+.1%} ({row['overhead_low']:+.1%} to {row['overhead_high']:+.1%})"


def _peak(row: dict[str, Any]) -> str:
    peak = "" if row.get("peak_bytes") is None else f"{row['peak_bytes'] / 2**30:.2f} GiB"
    return peak + ("" if row.get("peak_ratio") is None else f" ×{row['peak_ratio']:.2f}")


def fastest(rows: list[dict[str, Any]]) -> set[int]:
    """Indices of the rows whose overhead is least among those of their token count, case and step (the
    bare floor, one row per token count, is no contender)."""
    best: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        if r["kind"] not in KINDS:
            continue
        key = (r["tokens"], r["case"], r.get("step", "train"))
        if key not in best or r["overhead"] < rows[best[key]]["overhead"]:
            best[key] = i
    return set(best.values())


def path_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per token count, case and path: default or not, the first call, images/s, overhead, peak memory,
    the case's fastest in bold; a row that timed the inference step (no backward there) says so."""
    lines = [
        "| tokens | batch | case | path | default | first call | img/s | overhead (min to max) | peak memory |",
        "| --- | --- | --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    best = fastest(rows)
    for i, r in enumerate(rows):
        path = f"**{r['path']}** (fastest)" if i in best else r["path"]
        if r.get("step", "train") != "train":
            path += f" ({r['step']} step)"
        cells = [
            str(r["tokens"]), str(r["batch"]), r["case"], path, "yes" if r["default"] else "",
            f"{r['first_call_s']:.1f} s", f"{r['images_per_s']:.1f}", _percent(r), _peak(r),
        ]  # fmt: skip
        lines.append(f"| {' | '.join(cells)} |")
    return [*lines, ""]


def proposed_rows(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[str, str]]:
    """{(kind, dtype, token range): (path, evidence)}: per kind of term and token range, the path whose
    largest overhead over the cases of that kind is least, among the paths timed on every one of them;
    from training-step rows of the policy's kinds only (not the floor, not an inference step)."""
    groups: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in rows:
        if r["kind"] not in KINDS or r.get("step", "train") != "train":
            continue
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


BEGIN_MEASURED = "    # measured rows:"
END_MEASURED = "    # end of the measured rows"


def write_policy(text: str, rows: list[dict[str, Any]], source: str) -> str:
    """``text`` (the source of :mod:`vitpos.attention.policy`) with the measured rows of ``CUDA_TABLE``
    replaced by those the path rows propose (:func:`table_lines`), each with its evidence."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(BEGIN_MEASURED)]
    ends = [i for i, line in enumerate(lines) if line.startswith(END_MEASURED)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(
            f"the policy file has no single block of measured rows in CUDA_TABLE (a line starting "
            f"{BEGIN_MEASURED.strip()!r} and one starting {END_MEASURED.strip()!r}); pass vitpos/attention/policy.py"
        )
    proposed = [f"    {line}\n" for line in table_lines(rows, source)]
    return "".join(lines[: starts[0] + 1] + proposed + lines[ends[0] :])


def pinned_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The entries of :data:`vitpos.attention.triton.tuning.PINNED` the session's tuning rows propose: per
    GPU and kernel, the configuration the autotuner chose at every shape it timed, where it chose one only."""
    chosen: dict[tuple[tuple[int, ...], str], set[int | None]] = {}
    for r in rows:
        chosen.setdefault((tuple(r["gpu"]), r["kernel"]), set()).add(r["config"])
    pinned: dict[tuple[int, ...], dict[str, int]] = {}
    varied = []
    for (gpu, kernel), configs in sorted(chosen.items()):
        (config, *others) = configs
        if others or config is None:
            varied.append(f"{kernel} on {gpu}")
        else:
            pinned.setdefault(gpu, {})[kernel] = config
    lines = [f"PINNED = {pinned!r}  # vitpos/attention/triton/tuning.py: one configuration per kernel per GPU"]
    if varied:
        lines.append(f"# the autotuner chose by shape (left to the autotune): {', '.join(varied)}")
    return lines
