"""``python -m bench.attention.call_path``: the files of ``vitpos`` whose code one forward of an iRPE layer runs.

A one-block DeiT-Ti with contextual iRPE on keys (``irpe:product:ctx:k``), in training mode on
the CPU, on a 4x4 grid with a class token. After one call that fills the per-grid caches, a
second call of the block, of its stage and of the host's stages is followed with
:func:`sys.setprofile`; every ``vitpos`` file in which a function is entered is listed, in the
order first entered. This measures the architecture (how many files a reader follows from the
block's forward down to the attention kernel), not speed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

import vitpos


def files_entered(call: Callable[[], Any]) -> list[str]:
    """The ``vitpos`` files (relative paths) in which ``call`` enters a function, after one warm-up call."""
    root = os.path.dirname(vitpos.__file__)
    files: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(root):
            relative = os.path.relpath(name, root)
            if relative not in files:
                files.append(relative)

    call()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return files


def main() -> None:
    model = vitpos.create_model(
        "deit_tiny_patch16_224", relative="irpe:product:ctx:k", img_size=32, patch_size=8, depth=1
    ).train()
    images = torch.randn(2, 3, 32, 32)
    tokens, grid = model.downsamples[0](images)
    tokens = torch.cat([model.cls_token.expand(2, -1, -1), tokens], dim=1)
    stage = model.stages[0]
    calls = {
        "block forward": lambda: stage.blocks[0](tokens, grid, 1),
        "stage forward": lambda: stage(tokens, grid, 1),
        "host forward_stages": lambda: model.forward_stages(images),
    }
    for label, call in calls.items():
        files = files_entered(call)
        print(f"{label}: {len(files)} files: {', '.join(files)}")


if __name__ == "__main__":
    main()
