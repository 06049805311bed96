"""``python -m vitpos`` == ``vitpos``."""

import sys

from .cli import main

sys.exit(main())
