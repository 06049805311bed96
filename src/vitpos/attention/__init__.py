"""The attention kernel: relative encodings declare their terms, one module computes attention.

* :mod:`.terms` — :class:`RelativeTerms`, what an encoding adds (bucket ids, tables, a rotation);
* :mod:`.kernel` — :func:`attention`, the entry point every host calls, and the ``sdpa`` and
  ``explicit`` paths;
* :mod:`.policy` — which path computes a call on which device, and why (measurements);
* :mod:`.bucketed` — the ``stored`` and ``chunked`` paths (one autograd function);
* :mod:`.flex` — the ``flex`` path (FlexAttention with a ``score_mod``);
* :mod:`.bucket_lookup` — per-bucket scores read at every (query, key) pair, and summed back.
"""

from .kernel import attention
from .policy import PATHS, SUPPORTED_DTYPES, choose_path
from .terms import RelativeTerms, Rotation

__all__ = ["attention", "RelativeTerms", "Rotation", "PATHS", "SUPPORTED_DTYPES", "choose_path"]
