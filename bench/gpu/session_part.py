"""One part of ``python -m bench.gpu --session``, run in its own process (:mod:`bench.gpu.session`).

The part adds its rows to the session's JSON file (and rewrites its markdown section) as it measures
them, and stops starting rows when its seconds are spent. Each part imports only what it uses: the
study's and the data path's modules (scikit-learn, matplotlib) load in their own parts only.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch

from ..cases import Case
from ..quick_log import Budget, RowLog
from ..quick_settings import QuickSettings
from .session import section_writer
from .session_terms import PART as TERMS_ROWS
from .session_terms import configure_dynamo

BUDGET_NAMES = {
    "terms": {TERMS_ROWS: 1.0},
    "study": {"ensemble": 1.0},
    "data": {"augment": 0.3, "data": 0.7},
    "correctness": {"correctness": 1.0},
}
"""Per part, the names its code asks the budget about and their shares of the part's seconds."""


def _terms(s: QuickSettings, budget: Budget, log: RowLog, tokens: int) -> None:
    from .quick_parts import _build, _images, _paired_all
    from .session_terms import term_rows

    batch = max(1, s.batch * 196 // max(tokens, 196))
    images = _images(s, s.model, tokens, batch)

    def build(case: Case) -> torch.nn.Module:
        return _build(s, s.model, case.position, tokens)

    term_rows(s, budget, log, tokens, build, images, functools.partial(_paired_all, s))


def _study(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    from ..quick_ensemble import ensemble_rows

    ensemble_rows(s, budget, log, s.ensemble_members)


def _data(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    from .quick_data import augment_rows, data_rows

    rates = {
        r["tokens"]: r["baseline_images_per_s"]
        for r in log.rows
        if r.get("part") == TERMS_ROWS and r.get("step") == "train" and "baseline_images_per_s" in r
    }
    augment_rows(s, budget, log, rates)
    data_rows(s, budget, log)


def _correctness(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    from .check import check_rows
    from .quick import selected_cases

    check_rows(s.check, s.device, budget, log, selected_cases(s.cases))


def run_part(name: str, s: QuickSettings, json_path: Path, out: str, seconds: float) -> int:
    """Run the part ``name`` for at most ``seconds`` (rows started before then may finish); 1 if a
    correctness row failed."""
    log = RowLog.resume(json_path, section_writer(out))
    terms = name.startswith("terms-")
    budget = Budget(seconds, BUDGET_NAMES["terms" if terms else name], sys.stderr)
    configure_dynamo()
    budget.progress(f"{name}: {seconds:.0f} s on {s.device}, torch {torch.__version__}")
    try:
        if terms:
            _terms(s, budget, log, int(name.removeprefix("terms-")))
        else:
            {"study": _study, "data": _data, "correctness": _correctness}[name](s, budget, log)
    except Exception as err:  # the part says how it failed; the session goes on with the next
        log.add({"part": name, "error": f"{type(err).__name__}: {err}"[:500]})
        budget.progress(f"{name}: FAILED: {type(err).__name__}: {err}")
        return 2
    return 1 if any(r["part"] == "correctness" and r.get("pass") is False for r in log.rows) else 0
