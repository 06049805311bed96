"""The stacked models of an ensemble, their parameters in one flat buffer, and their training step.

:class:`Stack` holds S members' parameters as one flat (S, P) tensor, the tensors AdamW decays first;
the modules see views of it (:func:`torch.vmap` over :func:`torch.func.functional_call`; one member
runs without vmap). :class:`StackStep` is one optimiser step of every member: forward, each member's
loss (:class:`~.stack_metrics.MemberTasks`), backward, per-member gradient clipping and
:class:`~.stacked_adamw.StackedAdamW` over the flat buffer. Its operation count does not grow with
the member count and it never waits for the device (the stops are a tensor): each dispatched
operation is a kernel launch on a GPU, so this count bounds its speed there (``python -m bench.ensemble
--rate`` counts them, :mod:`.dispatch`). Eager, its arithmetic is that of each member trained alone
with ``torch.optim.AdamW``, bit for bit for a stack of one on a CPU. With ``compile`` the step is
handed to :func:`torch.compile` once per stack (its shapes never change, so CUDA graphs apply with
``mode="reduce-overhead"``); ``tests/engine/test_stacked_step.py`` checks that the compiled step
equals the eager one member by member in float64. Compiling is opt-in: on CUDA it is measured by
``python -m bench.ensemble --rate --compile`` and ``python -m bench.gpu --quick`` (part
``ensemble``), and stays off by default until a GPU row shows it correct and faster.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Collection

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..compile_cache import compile_privately
from .precision import Precision
from .stack_metrics import MemberTasks, member_losses
from .stacked_adamw import StackedAdamW, adamw_

__all__ = ["Stack", "StackStep", "COMPILE_MODES", "compile_mode", "bucket", "compiled_graphs", "stacked_forward"]

COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
"""``off``: eager; the others: the :func:`torch.compile` mode of the step (``reduce-overhead``: CUDA graphs)."""


def compile_mode(value: bool | str) -> str:
    """``compile`` as a mode of :data:`COMPILE_MODES` (True: CUDA graphs on CUDA, ``default`` elsewhere is
    decided by the caller; False: off)."""
    if value is True:
        return "reduce-overhead"
    if value is False:
        return "off"
    if value not in COMPILE_MODES:
        raise ValueError(f"compile = {value!r}; expected one of {', '.join(COMPILE_MODES)} (or True/False)")
    return value


def bucket(members: int) -> int:
    """The rows a compiled stack of ``members`` runs: the next power of two (its other rows padded and
    stopped), so the stacks of a study compile a few graphs per model, not one per member count."""
    return 1 << max(members - 1, 0).bit_length()


class Stack:
    """The members' parameters as one flat (rows, parameters) buffer, and modules that see rows of it.

    The trainable parameters named in ``first`` (those AdamW decays) take the first columns, the other
    trainable ones the next, frozen ones the last: :attr:`trainable` columns in all. ``rows`` (at least
    the member count) pads the stack with copies of the first member, for a compiled step's fixed shape.
    The members' ``models`` are only read: their weights are gathered where they lie (one concatenation)
    and moved to ``device`` (default: theirs) in one copy; :meth:`module` gives a member's module.
    """

    def __init__(
        self,
        models: list[nn.Module],
        first: Collection[str] = (),
        rows: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        self.members = len(models)
        self.rows = rows or len(models)
        if self.rows < len(models):
            raise ValueError(f"Stack: rows = {rows} is fewer than its {len(models)} members")
        device = torch.device(device) if device is not None else next(models[0].parameters()).device
        padded = models + [models[0]] * (self.rows - len(models))
        named = dict(models[0].named_parameters())
        trainable = [n for n, p in named.items() if p.requires_grad]
        order = [n for n in trainable if n in first]
        order += [n for n in trainable if n not in first] + [n for n in named if n not in trainable]
        self.decayed = sum(named[n].numel() for n in order if n in first and n in trainable)
        self.trainable = sum(named[n].numel() for n in trainable)
        with torch.no_grad():
            tensors = [dict(m.named_parameters()) for m in padded]
            flat = torch.cat([t[n].detach().reshape(-1) for t in tensors for n in order])
            self.flat = flat.view(self.rows, -1).to(device)
        self.base = copy.deepcopy(models[0]).to(device)
        """The module the stacked forward runs (:func:`stacked_forward`): its own weights are never used."""
        self.layout = order
        """The names in the flat buffer's column order."""
        self.params = self._views(self.flat)
        for name, view in self.params.items():
            view.requires_grad_(named[name].requires_grad)  # a leaf: the buffer needs none
        self.buffers = {
            name: torch.stack([dict(m.named_buffers())[name] for m in padded]).to(device)
            for name, _ in self.base.named_buffers()
        }

    def _views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each parameter as a view of ``flat`` (rows in the flat buffer's layout), in the module's order."""
        shapes = dict((name, p.shape) for name, p in self.base.named_parameters())
        views, start = {}, 0
        for name in self.layout:
            size = shapes[name].numel()
            views[name] = flat[:, start : start + size].view(len(flat), *shapes[name])
            start += size
        return {name: views[name] for name in shapes}

    def __len__(self) -> int:
        return self.members

    def module(self, member: int, own: bool = False) -> nn.Module:
        """Member ``member``'s module: a copy of :attr:`base` whose parameters are views of its row (what trains
        on, it sees), or with ``own`` of one copy of that row (a trained member handed back: saving it saves its
        weights alone, and the stack can go)."""
        shared = {id(t): t for t in (*self.base.parameters(), *self.base.buffers())}
        module = copy.deepcopy(self.base, shared)
        row = self.flat[member].clone() if own else self.flat[member]
        for name, view in self._views(row[None]).items():
            owner, _, leaf = name.rpartition(".")
            param = nn.Parameter(view[0].detach(), requires_grad=self.params[name].requires_grad)
            module.get_submodule(owner)._parameters[leaf] = param
        for name, stacked in self.buffers.items():
            owner, _, leaf = name.rpartition(".")
            module.get_submodule(owner)._buffers[leaf] = stacked[member].clone() if own else stacked[member]
        return module

    def gathered(self, members: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The parameters (views of one copy of their rows) and buffers of the members ``members``, in that
        order: what :meth:`__call__` runs to run those members alone."""
        return self._views(self.flat[members]), {k: v[members] for k, v in self.buffers.items()}

    def __call__(
        self, x: torch.Tensor, weights: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]] | None = None
    ) -> torch.Tensor:
        """The members' outputs (S, B, outputs) on their inputs (S, B, C, H, W); the padding rows, if any, see
        the first member's. With ``weights`` (:meth:`gathered`) only those members run, on the rows of ``x``."""
        if weights is not None:
            return stacked_forward(self.base, *weights, x)
        count = len(x)
        if count < self.rows:
            x = torch.cat([x, x[:1].expand(self.rows - count, *x.shape[1:])])
        return stacked_forward(self.base, self.params, self.buffers, x)[:count]

    @torch.no_grad()
    def restore(self, weights: torch.Tensor) -> None:
        """Put ``weights`` (rows, parameters: a copy of :attr:`flat` taken earlier) back as the parameters."""
        self.flat.copy_(weights)

    def train(self, mode: bool) -> None:
        self.base.train(mode)

    def spans(self) -> list[tuple[int, int]]:
        """The trainable tensors' column spans in the flat buffer, in the module's order (from shapes alone:
        nothing is dispatched)."""
        starts, start = {}, 0
        for name in self.layout:
            starts[name] = start
            start += self.params[name].shape[1:].numel()
        return [(starts[n], starts[n] + p.shape[1:].numel()) for n, p in self.params.items() if p.requires_grad]


def stacked_forward(base: nn.Module, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
    """``base`` run with every row of ``params`` and ``buffers`` on its row of ``x`` (one row: no vmap)."""
    if len(x) == 1:
        first = {k: v[0] for k, v in params.items()}, {k: v[0] for k, v in buffers.items()}
        return functional_call(base, first, (x[0],))[None]
    one = lambda p, b, xs: functional_call(base, (p, b), (xs,))  # noqa: E731
    return torch.vmap(one, randomness="different")(params, buffers, x)


def clip_(grad: torch.Tensor, spans: list[tuple[int, int]], max_norm: float) -> torch.Tensor:
    """Clip each row of ``grad`` (S, P) to global norm ``max_norm``, in place. One row: the norm of the
    tensors' norms (``spans``, in the module's order), as ``clip_grad_norm_`` clips a lone model, to its
    bits; several: one norm over the row, the same number to rounding, in a fixed few operations."""
    if len(grad) == 1:
        norms = torch.stack([grad[:, a:b].norm(2, dim=1) for a, b in spans], dim=1).norm(2, dim=1)
    else:
        norms = grad.norm(2, dim=1)
    return grad.mul_((max_norm / (norms + 1e-6)).clamp(max=1.0).to(grad.dtype)[:, None])


class StackStep:
    """One optimiser step of every member of ``stack``: forward, losses, backward, clipping, AdamW.

    ``tasks`` gives each member's loss from the stacked outputs and targets; the stack's first
    :attr:`Stack.decayed` columns are decayed. ``compile`` (a mode of :data:`COMPILE_MODES`) compiles
    the whole step as one graph (:func:`torch.func.grad` inside, so no graph break) on its first call,
    with ``backend`` (tests use ``aot_eager``, which traces as Inductor does but runs the traced
    operations as they are). Stacks of one shape (model, rows, batch, settings) share one graph in a
    process (:func:`compiled_graphs` counts them), each graph with its own code object, so a study's
    many stacks never meet Dynamo's recompile limit.
    """

    def __init__(
        self,
        stack: Stack,
        tasks: MemberTasks,
        *,
        weight_decay: float,
        betas: tuple[float, float],
        grad_clip: float = 0.0,
        precision: Precision | None = None,
        compile: bool | str = False,
        backend: str | Callable = "inductor",
    ) -> None:
        self.stack = stack
        self.tasks = tasks
        self.grad_clip = grad_clip
        self.precision = precision or Precision("cpu")
        self.optimizer = StackedAdamW(stack.flat[:, : stack.trainable], stack.decayed, weight_decay, betas)
        pad = stack.rows - len(tasks)
        self.optimizer.stop(*range(len(tasks), stack.rows))  # padding rows never train
        self.regression = torch.cat([tasks.regression, tasks.regression[:1].expand(pad)])
        self.spans = stack.spans()
        self.mode = compile_mode(compile)
        self._step = self._eager if self.mode == "off" else self._compiled(backend)

    @property
    def active(self) -> torch.Tensor:
        """The members that still train (bool, rows)."""
        return self.optimizer.active

    def stop(self, *members: int) -> None:
        """Freeze ``members``' parameters and AdamW state from the next step on."""
        self.optimizer.stop(*members)

    def plan(self, rates: torch.Tensor) -> None:
        """Plan the members' learning rates ``rates`` (steps, members; float64) of the steps to come (padding
        rows: none)."""
        pad = self.stack.rows - len(self.tasks)
        self.optimizer.plan(torch.cat([rates, rates.new_zeros(len(rates), pad)], 1) if pad else rates)

    def __call__(self, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Train every active member one step on its batch (``x``: rows, B, ...; ``targets``: rows, B, width)
        at its planned learning rate (:meth:`plan`); returns the losses (rows) and the outputs, detached."""
        return self._step(x, targets)

    def _eager(self, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        stack = self.stack
        with self.precision.autocast():
            outputs = stacked_forward(stack.base, stack.params, stack.buffers, x)
        losses = member_losses(outputs, targets, self.regression, self.tasks.settings)
        trainable = [p for p in stack.params.values() if p.requires_grad]
        grads = dict(zip(map(id, trainable), torch.autograd.grad(losses.sum(), trainable), strict=True))
        grad = torch.cat([grads[id(stack.params[n])].flatten(1) for n in stack.layout[: len(grads)]], 1)
        if self.grad_clip:
            clip_(grad, self.spans, self.grad_clip)
        self.optimizer.step(grad)
        return losses.detach(), outputs.detach()

    def _compiled(self, backend: str | Callable) -> Callable[[torch.Tensor, torch.Tensor], tuple]:
        """The compiled step of this stack's shape (compiled on first use, shared with stacks of its shape)."""
        stack, opt = self.stack, self.optimizer
        key = (*self._shape(), self.mode, backend)
        if key not in _GRAPHS:
            compiled = compile_privately(
                _pure_step(self), mode=None if self.mode == "default" else self.mode, backend=backend,
                fullgraph=True, dynamic=False,
            )  # fmt: skip
            _GRAPHS[key] = compiled, stack.base
        graph, template = _GRAPHS[key]
        state = (stack.flat, opt.exp_avg, opt.exp_avg_sq, opt.active)
        for t in state:
            torch._dynamo.mark_static_address(t)  # updated in place: CUDA graphs keep them where they are

        def step(x: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
            template.train(True)  # the graph's module, whatever its own stack did with it since (its guard)
            return graph(*state, stack.buffers, self.regression, x, targets, opt.take())

        return step

    def _shape(self) -> tuple:
        """What the step's graph depends on besides its tensors' shapes: the model, rows and settings."""
        base = self.stack.base
        model = repr(base.cfg) if hasattr(base, "cfg") else id(base)
        return (
            type(base), model, self.stack.rows, tuple(self.stack.layout), self.optimizer.settings,
            self.tasks.settings, self.grad_clip, repr(self.precision), str(self.stack.flat.device),
        )  # fmt: skip


_GRAPHS: dict[tuple, tuple[Callable[..., tuple[Tensor, Tensor]], nn.Module]] = {}
"""This process's compiled steps by shape, each with the module its graph runs (the first stack's)."""


def compiled_graphs() -> int:
    """How many step graphs this process has compiled (one per stack shape)."""
    return len(_GRAPHS)


def _pure_step(step: StackStep) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """``step``'s arithmetic as a function of tensors alone, in a code object of its own (Dynamo keeps its
    compiled graphs and counts recompiles per code object)."""
    base, spans, layout = step.stack.base, step.spans, step.stack.layout
    shapes = {n: p.shape[1:] for n, p in step.stack.params.items()}
    trainable = [n for n in layout if step.stack.params[n].requires_grad]
    sizes = [shapes[n].numel() for n in trainable]
    frozen_names = layout[len(trainable) :]
    settings, losses_settings = step.optimizer.settings, step.tasks.settings
    grad_clip, precision, columns = step.grad_clip, step.precision, step.stack.trainable

    def run(
        flat: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, active: Tensor,
        buffers: dict[str, Tensor], regression: Tensor, x: Tensor, targets: Tensor, scalars: Tensor,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        rows = flat.shape[0]
        frozen = {n: c.view(rows, *shapes[n]) for n, c in zip(frozen_names, flat[:, columns:].split(
            [shapes[n].numel() for n in frozen_names], 1), strict=True)}  # fmt: skip

        def total(weights: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            views = {n: c.view(rows, *shapes[n]) for n, c in zip(trainable, weights.split(sizes, 1), strict=True)}
            with precision.autocast():
                outputs = stacked_forward(base, views | frozen, buffers, x)
            losses = member_losses(outputs, targets, regression, losses_settings)
            return losses.sum(), (losses.detach(), outputs.detach())

        grad, (losses, outputs) = torch.func.grad(total, has_aux=True)(flat[:, :columns].detach())
        if grad_clip:
            clip_(grad, spans, grad_clip)
        adamw_(flat[:, :columns], grad, exp_avg, exp_avg_sq, active, scalars, settings)
        return losses, outputs

    code = run.__code__.replace()  # a code object of this graph's own
    return types.FunctionType(code, run.__globals__, run.__name__, run.__defaults__, run.__closure__)
