"""Ctrl-C during training: finish the optimiser step, save it, and stop with one line.

While :meth:`InterruptRequest.deferred` is active (in the main thread of a single-process run),
the first SIGINT only sets :attr:`InterruptRequest.requested`; the trainer checks it where its
state is whole (between steps), saves a checkpoint and raises :class:`TrainingInterrupted`. A
second SIGINT raises :class:`KeyboardInterrupt` at once, as usual. Under ``torchrun`` the
processes could see the signal at different steps, so there the default handler stays.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

__all__ = ["InterruptRequest", "TrainingInterrupted"]


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on Ctrl-C at ``step``; ``checkpoint`` (if any) holds that step."""

    def __init__(self, step: int, run_dir: Path | None, checkpoint: Path | None) -> None:
        if checkpoint is not None:
            tail = f"checkpoint {checkpoint} holds it; train(..., resume=True) with the same run_dir continues"
        else:
            tail = "nothing was saved (no run folder)"
        super().__init__(f"interrupted at step {step}; {tail}")
        self.step, self.run_dir, self.checkpoint = step, run_dir, checkpoint


class InterruptRequest:
    """Whether Ctrl-C was pressed while training steps were running."""

    def __init__(self) -> None:
        self.requested = False

    @contextlib.contextmanager
    def deferred(self, enabled: bool = True) -> Iterator[None]:
        """Turn the first SIGINT into a request (when ``enabled`` and in the main thread)."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield
            return

        def ask(signum: int, frame: FrameType | None) -> None:
            self.requested = True
            signal.signal(signal.SIGINT, previous)  # a second Ctrl-C stops at once

        previous = signal.getsignal(signal.SIGINT) or signal.default_int_handler  # None: set outside Python
        signal.signal(signal.SIGINT, ask)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
