"""A compiled study compiles a bounded number of step graphs: one per model, padded member count and task mix."""

import pytest
import torch

from bench.ensemble_rate import step_graphs
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.optim import decays
from vitpos.engine.stack_metrics import MemberTasks
from vitpos.engine.stacked_step import Stack, StackStep, bucket
from vitpos.models.factory import create_model
from vitpos.study.protocol import StudyConfig

from ..engine.test_ensemble import MODEL

FULL_GRAPHS = 16
"""The step graphs a compiled ``--full`` study's first round compiles per process: 8 models (fourier and
fourier_pretrained share one) × 2 padded sizes (256 rows: a family's stack of 90 runs, every seed, task and
training-set size, and their 90 twins on the longer cap; 32 rows: its 12 learning-rate trials, 3 tasks at 2
rates on 2 seeds, and their twins). docs/study.md says so."""


def test_a_full_study_compiles_16_step_graphs_and_the_default_11():
    assert step_graphs(StudyConfig.full()) == FULL_GRAPHS
    # the default: the three curve families' stacks of 25 runs and their twins pad to 64; the others' of 15 and
    # theirs pad to 32, as do the 12 trials and theirs, with the same mix of task kinds: one graph
    assert step_graphs(StudyConfig()) == 3 * 2 + 5
    assert step_graphs(StudyConfig.full(), ["learned", "peg"]) == 4


def _stack_step(members: int, backend) -> StackStep:
    models = []
    for seed in range(members):
        torch.manual_seed(seed)
        models.append(create_model(MODEL.replace(absolute="learned:std=1", num_classes=2)).train())
    stack = Stack(models, [n for n, on in decays(models[0]).items() if on], rows=bucket(members))
    tasks = MemberTasks(
        [SyntheticTask(("direction", "distance")[i % 2]).info for i in range(members)], stack.flat.device
    )
    return StackStep(
        stack, tasks, weight_decay=0.05, betas=(0.9, 0.999), grad_clip=1.0, compile="default", backend=backend
    )


@pytest.mark.slow
def test_stacks_of_one_shape_share_a_graph_and_no_graph_meets_the_recompile_limit(monkeypatch):
    """Stacks of 3, 4 and 2 members compile two graphs (4 rows, then 2), each traced once, even with Dynamo's
    recompile limit at 1 (every graph has a code object of its own) and the first stack's models since put
    in eval mode."""
    from vitpos.engine import stacked_step

    monkeypatch.setattr(stacked_step, "_GRAPHS", {})
    traced = []

    def backend(graph, inputs):
        traced.append(graph)
        return graph.forward

    with torch._dynamo.config.patch(recompile_limit=1):
        for members in (3, 4, 2):
            step = _stack_step(members, backend)
            rows = step.stack.rows
            x = torch.randn(rows, 4, 3, 16, 16)
            step.plan(torch.full((1, members), 1e-3, dtype=torch.float64))
            losses, _ = step(x, torch.zeros(rows, 4, 2))
            assert losses.shape == (rows,) and int(step.optimizer.steps.sum()) == members
            step.stack.base.eval()  # as a finished ensemble hands its models back: the next stack still trains
    assert len(traced) == 2 and stacked_step.compiled_graphs() == 2
