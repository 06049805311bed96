"""The attention kernel: relative encodings declare their terms, one module computes attention.

* :mod:`.terms` — :class:`RelativeTerms`, what an encoding adds (bucket ids, tables, a rotation);
* :mod:`.kernel` — :func:`attention`, the entry point every host calls;
* :mod:`.policy` — which path computes a call on which device, and why (measurements);
* :mod:`.chunked`, :mod:`.flex`, :mod:`.lookup` — the bucketed paths and their lookups.
"""

from .kernel import attention
from .policy import PATHS, SUPPORTED_DTYPES, choose_path
from .terms import RelativeTerms, Rotation

__all__ = ["attention", "RelativeTerms", "Rotation", "PATHS", "SUPPORTED_DTYPES", "choose_path"]
