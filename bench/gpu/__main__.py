"""``python -m bench.gpu``: the GPU benchmark, its quick check (``--quick``) and its session (``--session``)."""

import sys

from .cli import main

sys.exit(main())
