"""The tests here run the Triton kernels in Triton's interpreter, on CPU tensors.

``TRITON_INTERPRET=1`` must be set before :mod:`triton` is first imported (``triton.jit`` decides
there, for Triton's own library too, whether a function is interpreted), and other tests import
it early (``torch._dynamo`` does) and must not run interpreted: so these files are collected only
in a process started with ``TRITON_INTERPRET=1``, which ``tests/attention/test_triton_interpreter.py``
starts for each of them.
"""

import os

collect_ignore_glob = [] if os.environ.get("TRITON_INTERPRET") == "1" else ["test_*.py"]
