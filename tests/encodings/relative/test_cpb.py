"""relative=cpb (Swin V2's continuous position bias) against a literal reference: values, gradients, autocast.

The reference (:mod:`tests.weights.swin_v2_reference`) builds the network's inputs one offset at a
time from the equations and indexes them pair by pair; attention is written out with einsum.
"""

from __future__ import annotations

import pytest
import torch

import vitpos
from vitpos.encodings.base import SlotContext
from vitpos.encodings.relative.cpb import HIDDEN, ContinuousPositionBias, log_spaced_offsets
from vitpos.models.layers import Attention
from vitpos.spec import SlotSpec

from ...conftest import TINY, TINY_SWIN
from ...models.test_compile import check_compiled_equals_eager
from ...weights.swin_v2_reference import log_coords, offset_index
from .test_slot import largest_allocation

GRIDS = [(4, 4), (7, 7), (8, 8), (3, 5), (6, 2), (1, 4)]  # windows 4, 7, 8; non-square; one row


def encoding(heads: int, grid, prefix: int = 0, text: str = "cpb", seed: int = 0) -> ContinuousPositionBias:
    """A cpb module with every parameter random (trunc-normal std 0.02 would keep sigmoid near 1/2)."""
    spec = SlotSpec.parse(text)
    module = ContinuousPositionBias.from_spec(spec, SlotContext(8 * heads, heads, 1, grid, prefix))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (1.0 if p.ndim < 2 or p.shape[1] == 2 else 0.1))
    return module.double()


def literal_bias(module: ContinuousPositionBias, grid, prefix: int, pretrained: int | None = None) -> torch.Tensor:
    """(heads, P + HW, P + HW): 16 sigmoid(network) at each pair's log-spaced offset; prefix pairs 16 sigmoid(p)."""
    w1, b1, w2 = module.mlp[0].weight, module.mlp[0].bias, module.mlp[2].weight
    logits = torch.relu(log_coords(grid, pretrained) @ w1.T + b1) @ w2.T  # offsets, heads
    cells = 16 * torch.sigmoid(logits[offset_index(grid)]).permute(2, 0, 1)
    heads, n = cells.shape[0], cells.shape[1] + prefix
    out = torch.empty(heads, n, n, dtype=cells.dtype)
    if prefix:
        out[:] = 16 * torch.sigmoid(module.prefix_logit)[:, None, None]
    out[:, prefix:, prefix:] = cells
    return out


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_the_bias_equals_the_literal_reference(grid, prefix):
    module = encoding(3, grid, prefix)
    torch.testing.assert_close(
        module.position_bias(grid, prefix), literal_bias(module, grid, prefix), rtol=1e-12, atol=0
    )
    terms = module.bucket_bias_terms(grid, prefix)  # the per-offset form that training uses
    torch.testing.assert_close(terms.logits(None, None, 1.0)[0], literal_bias(module, grid, prefix), rtol=1e-12, atol=0)


@pytest.mark.parametrize("grid", [(4, 4), (7, 7), (5, 3)])
def test_a_pretrained_window_fixes_the_scale_of_the_offsets(grid):
    module = encoding(2, grid, text="cpb:pretrained=6")
    torch.testing.assert_close(module.position_bias(grid, 0), literal_bias(module, grid, 0, pretrained=6))
    assert not torch.allclose(module.position_bias(grid, 0), literal_bias(module, grid, 0))


def literal_attention(attn: Attention, x: torch.Tensor, grid, prefix: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + B) v, projected, with B from :func:`literal_bias`."""
    b, n, c = x.shape
    q, k, v = (attn.qkv(x).reshape(b, n, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4)).unbind(0)
    logits = torch.einsum("bhid,bhjd->bhij", q, k) * attn.scale + literal_bias(attn.relative, grid, prefix)
    out = torch.einsum("bhij,bhjd->bhid", logits.softmax(-1), v)
    return attn.proj(out.transpose(1, 2).reshape(b, n, c))


@pytest.mark.parametrize("path", ["stored", "chunked", "explicit", "sdpa"])
@pytest.mark.parametrize("grid,prefix", [((4, 4), 1), ((3, 5), 0), ((2, 6), 2)])
def test_attention_with_cpb_and_its_gradients_equal_the_literal_reference(path, grid, prefix):
    heads = 2
    attn = Attention(8 * heads, heads, relative=encoding(heads, grid, prefix)).double().train()
    attn.path = path
    x = torch.randn(2, prefix + grid[0] * grid[1], 8 * heads, dtype=torch.float64, requires_grad=True)
    ours = attn(x, grid, prefix)
    grads = torch.autograd.grad(ours.square().sum(), [x, *attn.parameters()])
    theirs = literal_attention(attn, x, grid, prefix)
    expected = torch.autograd.grad(theirs.square().sum(), [x, *attn.parameters()])
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    for (name, _), got, want in zip([("x", None), *attn.named_parameters()], grads, expected, strict=True):
        assert want.abs().sum() > 0, name
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11, msg=name)


@pytest.mark.parametrize("dtype,tolerance", [(torch.bfloat16, 6e-2), (torch.float16, 1e-2)])
def test_cpu_autocast_stays_close_to_float32_and_trains_every_parameter(dtype, tolerance):
    grid, prefix, heads = (4, 6), 1, 2
    attn = Attention(8 * heads, heads, relative=encoding(heads, grid, prefix)).float().train()
    x = torch.randn(2, prefix + 24, 8 * heads)
    reference = literal_attention(attn.double(), x.double(), grid, prefix).float()
    attn.float()
    with torch.autocast("cpu", dtype=dtype):
        out = attn(x, grid, prefix)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), reference, rtol=tolerance, atol=tolerance)
    out.float().square().sum().backward()
    for name, p in attn.relative.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_parameter_count_per_block_is_the_network_and_a_logit_per_head_for_prefix_pairs():
    for heads, prefix in ((3, 0), (6, 1)):
        module = encoding(heads, (7, 7), prefix)
        assert sum(p.numel() for p in module.parameters()) == 2 * HIDDEN + HIDDEN + HIDDEN * heads + heads * bool(
            prefix
        )
    swin = vitpos.create_model("swin_tiny", relative="cpb")
    blocks = [(heads, depth) for heads, depth in zip((3, 6, 12, 24), (2, 2, 6, 2), strict=True)]
    assert sum(p.numel() for n, p in swin.named_parameters() if ".relative." in n) == sum(
        depth * (3 * HIDDEN + HIDDEN * heads) for heads, depth in blocks
    )


def test_a_vit_with_class_token_runs_at_other_and_non_square_grids():
    model = vitpos.create_model("deit_tiny_patch16_224", relative="cpb", img_size=32, patch_size=8, depth=1)
    for size in ((32, 32), (24, 48), (56, 16)):
        assert model(torch.randn(2, 3, *size)).shape == (2, 1000)


def test_without_prefix_parameters_prefix_tokens_are_refused():
    module = encoding(2, (4, 4), prefix=0)
    with pytest.raises(ValueError, match="cpb encoding was built for a model without prefix tokens"):
        module.position_bias((4, 4), 1)


def test_the_largest_tensor_is_the_networks_hidden_layer_not_n_n_d():
    heads, head_dim, grid, prefix = 2, 16, (16, 16), 1
    attn = Attention(heads * head_dim, heads, relative=encoding(heads, grid, prefix).float())
    n = prefix + grid[0] * grid[1]
    hidden = (2 * grid[0] - 1) * (2 * grid[1] - 1) * HIDDEN
    assert hidden < n * n * head_dim
    assert largest_allocation(attn, "cpb", grid, prefix) <= max(hidden, heads * n * n)


@pytest.mark.parametrize("grid,pretrained", [((8, 8), None), ((3, 5), None), ((1, 2), None), ((4, 4), 6)])
def test_the_network_inputs_equal_the_equations_offset_by_offset(grid, pretrained):
    spans = None if pretrained is None else (pretrained, pretrained)
    torch.testing.assert_close(log_spaced_offsets(grid, spans), log_coords(grid, pretrained), rtol=1e-15, atol=0)


def test_cpb_compiles_without_graph_breaks():
    # aot_eager, as the other slots' compile tests: Dynamo and AOT autograd, no inductor C++ build
    model = vitpos.create_model("vit_lite_7_4", **TINY | dict(depth=1), absolute="none", relative="cpb")
    check_compiled_equals_eager(model, "aot_eager", None)


@pytest.mark.slow
def test_swin_v2_compiles_without_graph_breaks():
    """Cosine attention, post-norm blocks and cpb in windows; the fast test above compiles cpb alone."""
    swin = vitpos.create_model("swinv2_tiny_window8_256", **TINY_SWIN | dict(depths=(1, 1, 1, 1))).eval()
    torch._dynamo.reset()  # the window attention's forward is compiled by other tests of this process too
    compiled = torch.compile(swin, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 3, 32, 48)
    torch.testing.assert_close(compiled(x), swin(x), rtol=1e-5, atol=1e-6)
