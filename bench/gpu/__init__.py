"""``python -m bench.gpu`` and its parts: the long GPU tables (:mod:`.cli`, :mod:`.report`), the quick
check (``--quick``: :mod:`.quick`, its correctness part :mod:`.check` on the layers of :mod:`.check_layers`,
:mod:`.quick_parts`, :mod:`.path_rows` and :mod:`.path_report`, :mod:`.quick_data`; which path a call took:
:mod:`.taken_path`) and the session (``--session``: :mod:`.session`, :mod:`.session_part`,
:mod:`.session_terms`). Importing the package imports none of them.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """``bench.gpu.main`` and ``bench.gpu.parse_args``: the command line's, imported when first asked for."""
    if name in ("main", "parse_args"):
        from . import cli

        return getattr(cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
