"""Command tests train tiny models too: share the engine tests' fixtures."""

from ..engine.conftest import _one_thread  # noqa: F401  (autouse fixture)
