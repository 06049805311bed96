"""A tiny, fast-learning setup on 16x16 red-green images (a 4x4 patch grid)."""

import pytest

from vitpos.engine import RunRequest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every engine test runs tiny models on one thread."""


TINY_MODEL = dict(img_size=16, patch_size=4, embed_dim=64, depth=1, num_heads=4, head="gap", absolute="sincos2d")
"""One block, width 64, GAP head, fixed 2-D sinusoids: leaves chance level in a few dozen steps."""


def tiny_request(task: str = "direction", n: int = 512, model: dict | None = None, **train) -> RunRequest:
    """A request for ``task`` with ``n`` training images; ``train`` overrides training options."""
    spec = f"synthetic:{task}:img=16:train={n}:val=128:test=128"
    options = {"data": spec, "epochs": 4, "batch_size": 32, "lr": 3e-3, "warmup_epochs": 0, "progress": False, **train}
    return RunRequest("thesis_vit", {**TINY_MODEL, **(model or {})}, options)


def without_times(history: list[dict]) -> list[dict]:
    """Epoch rows without the wall-clock columns."""
    return [{k: v for k, v in row.items() if k not in ("time_s", "images_per_s")} for row in history]
