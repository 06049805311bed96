"""The DETR host: DETR-R50's parameter count, shapes at any size, every slot in its encoder,
the queries-and-keys join, the kernel path at 1,000+ tokens, autocast, and overfitting."""

import pytest
import torch
import torch.nn.functional as F

import vitpos
from vitpos.data.synthetic_detect import SyntheticDetection
from vitpos.models.host import is_host
from vitpos.models.layers import Block

from ...conftest import TINY_SWIN


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny detectors run faster on one thread where cores are shared."""


def count(model, skip="", only=""):
    return sum(
        p.numel() for n, p in model.named_parameters() if n.startswith(only) and not (skip and n.startswith(skip))
    )


def resnet50_trainable_in_detr() -> int:
    """The convolution weights of ResNet-50's layer2-4: DETR freezes conv1 and layer1, its batch norms are buffers."""
    total, channels = 0, 256
    for width, blocks in ((128, 4), (256, 6), (512, 3)):
        for block in range(blocks):
            total += channels * width + 9 * width * width + width * 4 * width  # 1x1, 3x3, 1x1 convolutions
            total += channels * 4 * width if block == 0 else 0  # the projection shortcut
            channels = 4 * width
    return total


def test_detr_r50_transformer_has_detrs_parameter_count():
    d, ffn, layers, queries, classes = 256, 2048, 6, 100, 91
    attention = 4 * d * d + 4 * d  # in-projection (3d x d + 3d) and output projection
    feed_forward = 2 * d * ffn + ffn + d
    encoder = layers * (attention + feed_forward + 2 * 2 * d)
    decoder = layers * (2 * attention + feed_forward + 3 * 2 * d) + 2 * d
    heads = (d * (classes + 1) + classes + 1) + 2 * (d * d + d) + (4 * d + 4)
    detr = encoder + decoder + queries * d + (2048 * d + d) + heads
    with torch.device("meta"):
        model = vitpos.create_model("detr_r50_shapes")
    parts = (
        count(model, only="encoder.stages."),
        count(model, only="decoder.layers.") + count(model, only="decoder.norm."),
    )
    assert parts == (encoder, decoder) == (7_890_432, 9_473_024)
    assert count(model, only="class_embed.") + count(model, only="bbox_embed.") == heads
    # DETR-R50's trainable count as DETR's main.py prints it; vitpos adds the pre-norm encoder's final LayerNorm
    assert count(model, skip="backbone.") - 2 * d + resnet50_trainable_in_detr() == 41_302_368
    assert count(model, skip="backbone.") == detr + 2 * d


@pytest.mark.parametrize("size", [(32, 32), (24, 40), (48, 32)])
def test_outputs_at_any_size(size):
    model = vitpos.create_model("detr_tiny_sine_irpe_ctx").eval()
    out = model(torch.randn(2, 3, *size))
    assert out["pred_logits"].shape == (2, 8, 5) and out["pred_boxes"].shape == (2, 8, 4)
    assert len(out["aux_outputs"]) == 1 and out["aux_outputs"][0]["pred_boxes"].shape == (2, 8, 4)
    assert out["pred_boxes"].min() > 0 and out["pred_boxes"].max() < 1
    [features] = model.forward_features(torch.randn(1, 3, *size))
    assert features.shape == (1, 64, size[0] // 4, size[1] // 4)


def test_sizes_the_stride_does_not_divide_are_a_clear_error():
    with pytest.raises(ValueError, match="stride 4"):
        vitpos.create_model("detr_tiny_sine")(torch.randn(1, 3, 30, 32))


def test_detr_is_a_host_and_forward_is_head_of_tokens():
    model = vitpos.create_model("detr_tiny_sine_irpe_bias").eval()
    assert is_host(model)
    x = torch.randn(2, 3, 24, 36)
    out = model.forward_head(model.forward_tokens(x), grid=model.stage_grids((24, 36))[0])
    torch.testing.assert_close(model(x)["pred_boxes"], out["pred_boxes"])
    assert set(model.position_parameters()) == {n for n, _ in model.named_parameters() if ".relative." in n}
    with pytest.raises(ValueError, match="pass the grid"):
        model.forward_head(model.forward_tokens(x))


SLOTS = [
    dict(absolute="sine", join="detr"),
    dict(absolute="none", join="detr", relative="irpe:product:ctx:qkv:ratio=2"),
    dict(absolute="learned", join="detr", conditional="peg@0"),
    dict(absolute="sincos2d", join="input", relative="rope2d"),
    dict(absolute="sine", join="shared", relative="shaw"),
    dict(absolute="learned", join="unshared", relative="irpe:product:bias:k"),
    dict(absolute="sine", join="lape", relative="irpe:product:bias:k"),
    dict(absolute="fourier", join="detr", relative="swin"),
    dict(absolute="none", join="input", conditional="peg@-1"),
]


@pytest.mark.parametrize("slots", SLOTS, ids=lambda s: ",".join(s.values()))
def test_every_slot_kind_trains_in_the_encoder(slots):
    model = vitpos.create_model("detr_tiny_sine", enc_depth=2, dec_depth=1, **slots)
    targets = SyntheticDetection(img_size=(32, 48), vary=0).render("val")[torch.arange(2)][1].targets
    loss = model.criterion()(model(torch.rand(2, 3, 32, 48)), targets)
    loss.backward()
    position = model.position_parameters()
    assert all(p.grad is not None for p in position.values())
    assert (model.stages[0].blocks[0].attn.relative is None) == (slots.get("relative", "none") == "none")


def literal_block(block: Block, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A pre-norm block whose queries and keys see norm(x) + pos and whose values see norm(x)."""
    attn, heads = block.attn, block.attn.num_heads
    h = block.norm1(x)
    w, b = attn.qkv.weight.chunk(3), attn.qkv.bias.chunk(3)
    split = lambda t: t.unflatten(-1, (heads, -1)).transpose(1, 2)  # noqa: E731
    q, k, v = split(F.linear(h + pos, w[0], b[0])), split(F.linear(h + pos, w[1], b[1])), split(F.linear(h, w[2], b[2]))
    weights = (q @ k.transpose(-2, -1) * attn.scale).softmax(-1)
    x = x + attn.proj((weights @ v).transpose(1, 2).flatten(2))
    return x + block.mlp(block.norm2(x))


def test_the_detr_join_adds_the_encoding_to_queries_and_keys_only():
    model = vitpos.create_model("detr_tiny_sine", enc_depth=2).double().eval()
    stage = model.stages[0]
    grid = (4, 6)
    x = torch.randn(2, 24, 64, dtype=torch.float64)
    pos = stage.position_encoding(grid)
    expected = x
    for block in stage.blocks:
        expected = literal_block(block, expected, pos)
    torch.testing.assert_close(stage(x, grid, 0), expected)
    as_input = vitpos.create_model("detr_tiny_sine", enc_depth=2, join="shared").double().eval()
    as_input.load_state_dict(model.state_dict())
    assert not torch.allclose(as_input.stages[0](x, grid, 0), expected)


def test_the_detr_join_reaches_window_attention():
    """On Swin the encoding is cut into the windows with the tokens (literal test: tests/models)."""
    torch.manual_seed(0)
    model = vitpos.create_model("swin_tiny", **TINY_SWIN, absolute="learned", join="detr", relative="none").eval()
    x = torch.randn(1, 3, 32, 32)
    before = model(x)
    with torch.no_grad():
        model.stages[0].absolute.table.add_(torch.randn_like(model.stages[0].absolute.table))
    assert not torch.allclose(model(x), before)


def test_relative_terms_at_1024_tokens_take_the_chunked_path(monkeypatch):
    import vitpos.attention.kernel as kernel

    chosen = []
    original = kernel.choose_path
    monkeypatch.setattr(
        kernel, "choose_path", lambda request: chosen.append((request.num_tokens, original(request))) or chosen[-1][1]
    )
    model = vitpos.create_model("detr_tiny_sine_irpe_ctx", enc_depth=1, dec_depth=1)
    out = model(torch.rand(1, 3, 128, 128))  # a 32 x 32 grid
    out["pred_boxes"].sum().backward()
    assert chosen == [(1024, "chunked")]  # query chunks: no (N, N, d) tensor, no stored N x N weights
    chosen.clear()
    with torch.no_grad():
        model(torch.rand(1, 3, 128, 128))
    assert chosen == [(1024, "sdpa")]


def test_bf16_autocast_on_cpu_trains():
    model = vitpos.create_model("detr_tiny_sine_irpe_ctx")
    targets = SyntheticDetection(vary=0).render("val")[torch.arange(2)][1].targets
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.rand(2, 3, 32, 32))
    assert out["pred_logits"].dtype == torch.bfloat16
    loss = model.criterion()(out, targets)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_relative_tables_keep_their_zero_start():
    model = vitpos.create_model("detr_tiny_sine_irpe_ctx")
    tables = [p for n, p in model.named_parameters() if ".relative." in n]
    assert tables and all((t == 0).all() for t in tables)


def test_a_detector_overfits_four_images():
    """The set loss of four synthetic images of different sizes, padded, falls at least five-fold in 60 AdamW
    steps."""
    model = vitpos.create_model("detr_tiny_sine")
    images, padded = SyntheticDetection(train=4).render("train").padded_to(4)[torch.arange(4)]
    assert padded.padding_mask.any()
    x, targets = images.float() / 255, padded.targets
    criterion = model.criterion()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    losses = []
    for _ in range(60):
        loss = criterion(model(x, padding_mask=padded.padding_mask), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 5
