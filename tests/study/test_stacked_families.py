"""Every default study family trains as one stacked ensemble whatever attention path the policy picks,
with the CUDA kernels' refusal of vmap's batched inputs simulated, and each member ends where it ends alone."""

import pytest
import torch
import torch.nn.functional as F

from vitpos.attention import attention, kernel
from vitpos.attention.policy import unsupported
from vitpos.attention.vmap import under_vmap
from vitpos.data.synthetic import SyntheticTask
from vitpos.engine.config import TrainConfig
from vitpos.engine.ensemble import Member, Stack, stack_error, train_ensemble
from vitpos.engine.train import train
from vitpos.models.factory import create_model
from vitpos.study.families import DEFAULT_FAMILIES
from vitpos.study.hosts import study_model
from vitpos.study.protocol import StudyConfig
from vitpos.study.redgreen import RedGreenStudy
from vitpos.study.run import stacked_families

pytestmark = pytest.mark.usefixtures("one_thread")

TRAINED_PATHS = ("sdpa", "explicit", "stored", "chunked", "triton")
"""The paths that train on a CPU (``triton``: the fused operator's PyTorch arithmetic)."""


def _refuse_batched(monkeypatch, module, name: str, message: str) -> None:
    real = getattr(module, name)

    def refusing(q, *args, **kwargs):
        if under_vmap(q):
            raise RuntimeError(message)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(module, name, refusing)


@pytest.fixture
def as_on_cuda(monkeypatch):
    """The paths refuse vmap's batched inputs as on CUDA: SDPA's fused kernels (their strides), the fused
    operator, FlexAttention and the bucketed autograd function (no batching rule)."""
    _refuse_batched(monkeypatch, F, "scaled_dot_product_attention", "LSE is not correctly aligned (strideH)")
    for name in ("fused_attention", "flex_attention", "bucketed_attention"):
        _refuse_batched(monkeypatch, kernel, name, f"no batching rule for {name}")


@pytest.fixture
def forced(monkeypatch):
    """Force the policy's choice (on any device) to a path, where that path can compute the call."""
    choose = kernel.choose_path

    def force(path: str) -> None:
        monkeypatch.setattr(kernel, "choose_path", lambda r: path if unsupported(path, r) is None else choose(r))

    return force


def _member(seed: int) -> Member:
    data = SyntheticTask("direction", img_size=16, square_size=4, train=32, val=8, test=8, seed=seed).splits()
    settings = dict(epochs=1, batch_size=16, lr=3e-3, warmup_epochs=0.5, weight_decay=0.1, grad_clip=1.0)
    return Member(TrainConfig(data=data.info.spec, seed=seed, device="cpu", progress=False, **settings), data)


def _model_config(family):
    return family.model_config(study_model(16), num_classes=2)


@pytest.mark.parametrize("path", TRAINED_PATHS)
@pytest.mark.parametrize("family", DEFAULT_FAMILIES, ids=lambda f: f.label)
def test_every_family_stacks_on_every_path(float64, as_on_cuda, forced, family, path):
    """The model vmaps (forward and backward), and after two steps each member's parameters and test
    metrics equal those of the same model trained alone on the forced path."""
    forced(path)
    model_cfg = _model_config(family)
    assert stack_error(create_model(model_cfg).train()) is None
    members = [_member(0), _member(5)]
    together = train_ensemble(model_cfg, members)
    for member, result in zip(members, together, strict=True):
        alone = train(model_cfg, member.cfg, member.data)
        for (name, p), q in zip(result.model.named_parameters(), alone.model.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-7, atol=1e-9, msg=name)
        assert result.test == pytest.approx(alone.test, rel=1e-7)


@pytest.mark.parametrize("family", DEFAULT_FAMILIES, ids=lambda f: f.label)
def test_every_family_stacks_where_flex_is_chosen(float64, as_on_cuda, forced, family):
    """FlexAttention runs forward only on a CPU: a stacked forward equals each member's own forward on it."""
    forced("flex")
    models = []
    for seed in (0, 5):
        torch.manual_seed(seed)
        models.append(create_model(_model_config(family)).eval())
    x = torch.randn(2, 3, 3, 16, 16)
    with torch.no_grad():
        stacked = Stack(models)(x)
        for i, model in enumerate(models):
            torch.testing.assert_close(stacked[i], model(x[i]), rtol=1e-10, atol=1e-12)


def test_the_refusal_is_simulated(as_on_cuda):
    """Outside vmap SDPA runs; inside, it refuses as CUDA's kernels do."""
    q = torch.randn(1, 2, 5, 4)
    F.scaled_dot_product_attention(q, q, q)
    with pytest.raises(RuntimeError, match="strideH"):
        torch.vmap(lambda t: F.scaled_dot_product_attention(t, t, t))(q[None].expand(2, -1, -1, -1, -1))


def test_the_study_stacks_every_default_family(as_on_cuda):
    """With CUDA's refusals simulated, the study trains no default family one model at a time."""
    logs: list[str] = []
    families = {f.label: f for f in DEFAULT_FAMILIES}
    assert stacked_families(families, RedGreenStudy(StudyConfig()), "cpu", logs.append) == set(families)
    assert logs == []


def test_attention_under_vmap_compiles_as_one_graph():
    """``torch.compile`` reads the vmap check as a constant: one graph, the explicit path's numbers."""
    q = torch.randn(3, 1, 2, 5, 4)
    compiled = torch.compile(torch.vmap(lambda x: attention(x, x, x, scale=0.5)), fullgraph=True, backend="eager")
    expected = torch.stack([torch.softmax(x @ x.transpose(-1, -2) * 0.5, -1) @ x for x in q])
    torch.testing.assert_close(compiled(q), expected)
