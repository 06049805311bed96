"""FlexAttention's backward on CPU, for tests: its eager math (the reference the compiled kernel is
checked against), with every joint graph put through Inductor's own check for captured tensors that
need a gradient (each indexed once), the check that fails the compile on a GPU."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch.nn.attention.flex_attention as public
from torch._inductor.kernel.flex.flex_attention import validate_joint_graph

from vitpos.attention import kernel

HOP = importlib.import_module("torch._higher_order_ops.flex_attention")  # the module, not the operator


@contextmanager
def flex_backward_on_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Within: ``path="flex"`` runs with a gradient on CPU; yields the verdicts on every joint graph
    FlexAttention built (``"valid"`` or the check's error)."""
    verdicts: list[str] = []
    make = HOP.create_fw_bw_graph

    def checked(*args, **kwargs):
        forward, joint = make(*args, **kwargs)
        try:
            validate_joint_graph(joint.graph)
            verdicts.append("valid")
        except NotImplementedError as error:
            verdicts.append(str(error))
        return forward, joint

    monkeypatch.setattr(HOP, "create_fw_bw_graph", checked)
    monkeypatch.setattr(public, "_validate_device", lambda *tensors: None)  # the CPU refusal of a backward
    monkeypatch.setattr(kernel, "unsupported", lambda path, request: None)  # the policy's, for the same reason
    yield verdicts
