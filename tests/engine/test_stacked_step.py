"""The compiled stacked step equals the eager one member by member (float64), stops and rates included."""

import pytest
import torch
import torch.nn.functional as F

from vitpos.engine.optim import decays
from vitpos.engine.stacked_step import Stack, StackStep, compile_mode
from vitpos.models.factory import create_model

from .test_ensemble import MODEL

pytestmark = pytest.mark.usefixtures("one_thread")


def _step(family: dict, compile: str, backend: str = "inductor") -> StackStep:
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(create_model(MODEL.replace(num_classes=2, **family)).train())
    stack = Stack(models)

    def losses(outputs, targets):
        return [F.cross_entropy(outputs[i], targets[i]) for i in range(len(targets))]

    return StackStep(
        stack, decays(stack.base), losses, weight_decay=0.05, betas=(0.9, 0.999), grad_clip=0.5,
        compile=compile, backend=backend,
    )  # fmt: skip


LEARNED = {"absolute": "learned:std=1"}
IRPE = {"absolute": "none", "relative": "irpe:product:ctx:k"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "backend"),
    # Inductor's code generation once; the relative family's graph through the backend that skips it
    [(LEARNED, "inductor"), (LEARNED, "aot_eager"), (IRPE, "aot_eager")],
)
def test_the_compiled_step_equals_the_eager_one(float64, backend, family):
    """Four steps at three learning rates, member 1 stopped after the second: every member's losses and
    parameters equal the eager step's to 1e-12, and the stopped member's are frozen."""
    eager, compiled = _step(family, "off"), _step(family, "default", backend)
    generator = torch.Generator().manual_seed(0)
    lr = torch.tensor([1e-3, 3e-3, 1e-2], dtype=torch.float64)
    for k in range(4):
        if k == 2:
            eager.stop(1)
            compiled.stop(1)
            frozen = compiled.stack.member(1)
        x = torch.randn(3, 8, 3, 16, 16, generator=generator)
        targets = [torch.randint(0, 2, (8,), generator=generator) for _ in range(3)]
        (loss_a, out_a), (loss_b, out_b) = eager(x, targets, lr), compiled(x, targets, lr)
        torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=1e-12)
        torch.testing.assert_close(out_b, out_a, rtol=0, atol=1e-12)
    for name, p in eager.stack.params.items():
        torch.testing.assert_close(compiled.stack.params[name], p, rtol=0, atol=1e-12, msg=name)
        assert torch.equal(compiled.stack.params[name][1], frozen[name]), name
    assert compiled.optimizer.steps.tolist() == [4.0, 2.0, 4.0]


def test_compile_modes_are_named():
    assert compile_mode(True) == "reduce-overhead" and compile_mode(False) == "off"
    assert compile_mode("default") == "default"
    with pytest.raises(ValueError, match="compile = 'fast'; expected one of off, default, reduce-overhead"):
        compile_mode("fast")
