"""The flat stacked step: each member as trained alone (float64; bit for bit for a stack of one in float32),
the compiled step as the eager one, one graph per stack shape, and an operation count that does not grow
with the members."""

import pytest
import torch
import torch.nn.functional as F

from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.dispatch import DispatchCount
from vitpos.engine.optim import decays
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.engine.stacked_step import Stack, StackStep, bucket, compile_mode
from vitpos.models.factory import create_model
from vitpos.study.families import parse_family
from vitpos.study.hosts import study_model

from .test_ensemble import MODEL

pytestmark = pytest.mark.usefixtures("one_thread")

LEARNED = {"absolute": "learned:std=1"}
IRPE = {"absolute": "none", "relative": "irpe:product:ctx:k"}
TASKS = ("direction", "distance", "absolute")
RATES = (1e-3, 3e-3, 1e-2)


def _models(family: dict, members: int, model=MODEL) -> list[torch.nn.Module]:
    out = []
    for seed in range(members):
        torch.manual_seed(seed)
        out.append(create_model(model.replace(num_classes=2, **family)).train())
    return out


def _step(family: dict, members: int = 3, compile="off", backend="inductor", clip: float = 0.5) -> StackStep:
    models = _models(family, members)
    rows = members if compile == "off" else bucket(members)
    stack = Stack(models, [name for name, on in decays(models[0]).items() if on], rows=rows)
    tasks = MemberTasks([SyntheticTask(TASKS[i % 3], img_size=16).info for i in range(members)], torch.device("cpu"))
    return StackStep(
        stack, tasks, weight_decay=0.05, betas=(0.9, 0.999), grad_clip=clip, compile=compile, backend=backend
    )


def _batch(generator: torch.Generator, members: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images and targets of ``members`` (labels of the classification members, (dx, dy) of the regression
    ones), the first member's repeated over the padding rows."""
    x = torch.randn(members, 8, 3, 16, 16, generator=generator)
    y = torch.randint(0, 2, (members, 8, 2), generator=generator).to(x.dtype)
    y[1::3] = torch.randn(y[1::3].shape, generator=generator)  # the distance members regress
    y[::3, :, 1] = y[2::3, :, 1] = 0
    pad = rows - members
    return torch.cat([x, x[:1].expand(pad, *x.shape[1:])]), torch.cat([y, y[:1].expand(pad, *y.shape[1:])])


def _lone(model: torch.nn.Module, lr: float, clip: float):
    """One model's step as the single-model trainer takes it (clip_grad_norm_ and torch.optim.AdamW)."""
    groups = {True: [], False: []}
    params = dict(model.named_parameters())
    for name, on in decays(model).items():
        groups[on].append(params[name])
    optimizer = torch.optim.AdamW([{"params": groups[True], "weight_decay": 0.05}, {"params": groups[False]}], lr=lr)
    optimizer.param_groups[1]["weight_decay"] = 0.0

    def step(x: torch.Tensor, y: torch.Tensor, task: str) -> None:
        out = model(x)
        loss = F.mse_loss(out, y) if task == "distance" else F.cross_entropy(out, y[:, 0].long())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

    return step


def test_each_member_of_the_flat_step_is_its_model_trained_alone(float64):
    """Three members (classification and regression) at three rates, clipping active: after four steps, the
    second stopped after two and fed NaN images from then on, each member's parameters equal its model
    trained alone (the stopped one's after its two steps) to 1e-12, and nothing else took a NaN."""
    step = _step(LEARNED)
    lone_models = _models(LEARNED, 3)
    lone = [_lone(m, lr, 0.5) for m, lr in zip(lone_models, RATES, strict=True)]
    generator = torch.Generator().manual_seed(0)
    step.plan(torch.tensor(RATES, dtype=torch.float64).repeat(4, 1))
    for k in range(4):
        if k == 2:
            step.stop(1)
        x, y = _batch(generator, 3, 3)
        if k >= 2:
            x[1] = float("nan")
        step(x, y)
        for i, member_step in enumerate(lone):
            if not (k >= 2 and i == 1):
                member_step(x[i], y[i], TASKS[i])
    assert not step.stack.flat.isnan().any()
    for i, model in enumerate(lone_models):
        for name, p in model.named_parameters():
            torch.testing.assert_close(step.stack.params[name][i], p, rtol=0, atol=1e-12, msg=f"{i} {name}")
    assert step.optimizer.steps.tolist() == [4.0, 2.0, 4.0]


def test_a_members_module_sees_its_row_and_its_model_is_only_read():
    """A stack gathers its members' weights without changing them; a member's module holds views of its row
    (what trains, it sees) and gives that member's outputs, or with ``own`` one copy of that row alone."""
    models = _models(LEARNED, 3)
    before = [{n: p.clone() for n, p in m.named_parameters()} for m in models]
    stack = Stack(models, [name for name, on in decays(models[0]).items() if on])
    module = stack.module(1)
    with torch.no_grad():
        stack.flat.mul_(1.5)
    for name, p in module.named_parameters():
        assert torch.equal(p, stack.params[name][1]) and torch.equal(p, before[1][name] * 1.5), name
    for model, weights in zip(models, before, strict=True):
        assert all(torch.equal(p, weights[n]) for n, p in model.named_parameters())
    x = torch.randn(3, 2, 3, 16, 16)
    torch.testing.assert_close(module.eval()(x[1]), stack(x)[1], rtol=0, atol=1e-6)
    own = stack.module(2, own=True)  # a trained member handed back: its weights, and nothing of the others'
    with torch.no_grad():
        stack.flat.zero_()
    for name, p in own.named_parameters():
        assert torch.equal(p, before[2][name] * 1.5), name
        assert p.untyped_storage().nbytes() == stack.flat.shape[1] * stack.flat.element_size()


def test_a_stack_of_one_takes_the_earlier_steps_bits_in_float32():
    """The study's CPU path trains stacks of one: five clipped steps give the parameters the earlier stacked
    step gave, to the last bit (its arithmetic written out: the tensors' norms in the module's order, then
    torch.optim.AdamW's single-tensor loop)."""
    step = _step(LEARNED, members=1, clip=0.05)
    (model,) = _models(LEARNED, 1)
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for n, p in model.named_parameters() if decays(model)[n]], "weight_decay": 0.05},
            {"params": [p for n, p in model.named_parameters() if not decays(model)[n]], "weight_decay": 0.0},
        ],
        lr=3e-3,
    )
    generator = torch.Generator().manual_seed(0)
    step.plan(torch.full((5, 1), 3e-3, dtype=torch.float64))
    for _ in range(5):
        x, y = _batch(generator, 1, 1)
        step(x, y)
        loss = F.cross_entropy(model(x[0]), y[0, :, 0].long())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        norm = torch.stack([g[None].flatten(1).norm(2, dim=1) for g in grads], dim=1).norm(2, dim=1)
        for g in grads:
            g.mul_((0.05 / (norm + 1e-6)).clamp(max=1.0).view(*([1] * g.ndim)))
        optimizer.step()
    for name, p in model.named_parameters():
        assert torch.equal(step.stack.params[name][0], p), name


def _counted_step(members: int) -> DispatchCount:
    """The operations of one training step of the study model as the ensemble's loop runs it: gather, normalise,
    forward, losses, backward, clipping, AdamW, running metrics (after a first step)."""
    from vitpos.engine.epoch_metrics import EpochMetrics
    from vitpos.engine.stack_data import MemberSplits

    model_cfg = parse_family("learned").model_config(study_model(24), num_classes=2)
    models = _models({}, members, model=model_cfg)
    data = [SyntheticTask(TASKS[i % 3], img_size=24, train=8, val=8, test=8, seed=i).splits().train for i in range(3)]
    splits = [data[i % 3] for i in range(members)]
    tasks = MemberTasks([s.info for s in splits], torch.device("cpu"))
    stack = Stack(models, [name for name, on in decays(models[0]).items() if on])
    step = StackStep(stack, tasks, weight_decay=0.05, betas=(0.9, 0.999), grad_clip=1.0)
    source = MemberSplits(splits, tasks, torch.device("cpu"))
    rows = source.global_index(torch.arange(4).expand(members, -1))
    running = EpochMetrics(tasks, 4)
    step.plan(torch.full((2, members), 1e-3, dtype=torch.float64))

    def once() -> None:
        images, targets = source.batch(rows)
        loss, outputs = step(source.normalized(images), targets)
        running.add(step.optimizer.taken, loss, outputs, targets)

    once()
    with DispatchCount() as count:
        once()
    return count


def test_a_training_step_dispatches_as_many_operations_for_2_members_as_for_6():
    """No operation per member: the same operations at 2 and 6 members, at most 380 of them and 150 that are
    no views (12.7 and 5 per member step at 30 members; BENCHMARKS.md's python -m bench.ensemble --rate)."""
    two, six = _counted_step(2), _counted_step(6)
    assert two.ops == six.ops
    assert six.total <= 380 and six.kernels <= 150


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "backend"),
    # Inductor's code generation once; the relative family's graph through the backend that skips it
    [(LEARNED, "inductor"), (LEARNED, "aot_eager"), (IRPE, "aot_eager")],
)
def test_the_compiled_step_equals_the_eager_one(float64, backend, family):
    """Four steps at three learning rates, padded to 4 rows, member 1 stopped after the second and fed NaN
    images: every member's losses and parameters equal the eager step's to 1e-12, the stopped one's frozen."""
    eager, compiled = _step(family), _step(family, compile="default", backend=backend)
    generator = torch.Generator().manual_seed(0)
    for step in (eager, compiled):
        step.plan(torch.tensor(RATES, dtype=torch.float64).repeat(4, 1))
    for k in range(4):
        if k == 2:
            eager.stop(1)
            compiled.stop(1)
            frozen = compiled.stack.flat[1].clone()
        x, y = _batch(generator, 3, 4)
        if k >= 2:
            x[1] = float("nan")
        (loss_a, out_a), (loss_b, out_b) = eager(x[:3], y[:3]), compiled(x, y)
        keep = [0, 2] if k >= 2 else [0, 1, 2]
        torch.testing.assert_close(loss_b[keep], loss_a[keep], rtol=0, atol=1e-12)
        torch.testing.assert_close(out_b[keep], out_a[keep], rtol=0, atol=1e-12)
    torch.testing.assert_close(compiled.stack.flat[:3], eager.stack.flat, rtol=0, atol=1e-12)
    assert torch.equal(compiled.stack.flat[1], frozen)
    assert compiled.optimizer.steps.tolist() == [4.0, 2.0, 4.0, 0.0]


def test_compile_modes_are_named():
    assert compile_mode(True) == "reduce-overhead" and compile_mode(False) == "off"
    assert compile_mode("default") == "default"
    with pytest.raises(ValueError, match="compile = 'fast'; expected one of off, default, reduce-overhead"):
        compile_mode("fast")


def test_member_counts_pad_to_powers_of_two():
    assert [bucket(n) for n in (1, 2, 3, 6, 8, 20, 30, 33)] == [1, 2, 4, 8, 8, 32, 32, 64]
    with pytest.raises(ValueError, match="rows = 2 is fewer than its 3 members"):
        Stack(_models(LEARNED, 3), rows=2)
