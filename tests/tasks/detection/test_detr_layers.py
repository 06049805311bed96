"""DETR's encoder and decoder layers against a written-out pre-norm DETR layer (DETR's
``forward_pre``) on random weights, with a padded memory: ``pos`` reaches the encoder's queries and
keys and the cross-attention's keys, ``query_pos`` the self-attention's queries and keys and the
cross-attention's queries, and padded cells are never attended to."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import vitpos
from vitpos.padding import Padding


def random_detr():
    model = vitpos.create_model("detr_tiny_sine", enc_depth=2, dec_depth=2).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p), alpha=0.1)
    return model


def literal_attention(query, key, value, heads, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, key_padding):
    """Multi-head attention written out: (B, N, D) queries over (B, M, D) keys and values; -inf at padded keys."""
    split = lambda t: t.unflatten(-1, (heads, -1)).transpose(1, 2)  # noqa: E731
    q, k, v = split(F.linear(query, w_q, b_q)), split(F.linear(key, w_k, b_k)), split(F.linear(value, w_v, b_v))
    logits = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    logits = logits.masked_fill(key_padding[:, None, None, :], float("-inf"))
    return F.linear((logits.softmax(-1) @ v).transpose(1, 2).flatten(2), w_o, b_o)


def literal_encoder_layer(block, x, pos, key_padding):
    """x + attn(q = k = LN1(x) + pos, v = LN1(x)), then x + MLP(LN2(x))."""
    attn = block.attn
    h = block.norm1(x)
    (w_q, w_k, w_v), (b_q, b_k, b_v) = attn.qkv.weight.chunk(3), attn.qkv.bias.chunk(3)
    out = literal_attention(
        h + pos, h + pos, h, attn.num_heads, w_q, b_q, w_k, b_k, w_v, b_v, attn.proj.weight, attn.proj.bias, key_padding
    )
    x = x + out
    return x + block.mlp(block.norm2(x))


def mha_literal(module, query, key, value, key_padding):
    (w_q, w_k, w_v), (b_q, b_k, b_v) = module.in_proj_weight.chunk(3), module.in_proj_bias.chunk(3)
    o = module.out_proj
    return literal_attention(query, key, value, module.num_heads, w_q, b_q, w_k, b_k, w_v, b_v, o.weight, o.bias,
                             key_padding)  # fmt: skip


def literal_decoder_layer(layer, tgt, query_pos, memory, pos, memory_padding):
    """DETR's forward_pre: self-attention (q = k = LN1(t) + query_pos, v = LN1(t)), cross-attention
    (q = LN2(t) + query_pos, k = memory + pos, v = memory), then the ReLU feed-forward on LN3(t)."""
    h = layer.norm1(tgt)
    no_padding = torch.zeros(tgt.shape[:2], dtype=torch.bool)
    tgt = tgt + mha_literal(layer.self_attn, h + query_pos, h + query_pos, h, no_padding)
    h = layer.norm2(tgt)
    tgt = tgt + mha_literal(layer.cross_attn, h + query_pos, memory + pos, memory, memory_padding)
    return tgt + layer.mlp(layer.norm3(tgt))


def padded_grid() -> tuple[tuple[int, int], Padding]:
    grid = (4, 5)
    valid = torch.tensor([[4, 5], [2, 3]])
    return grid, Padding(grid, valid)


def test_encoder_layers_equal_the_written_out_layer_with_padded_keys():
    model = random_detr()
    grid, padding = padded_grid()
    stage = model.stages[0]
    x = torch.randn(2, 20, model.cfg.embed_dim, dtype=torch.float64)
    pos = stage.position_encoding(grid, padding)
    expected = x
    for block in stage.blocks:
        expected = literal_encoder_layer(block, expected, pos, padding.tokens())
    with torch.no_grad():
        got = stage(x, grid, 0, padding)
        torch.testing.assert_close(got[padding.tokens() == 0], expected[padding.tokens() == 0].detach())


def test_decoder_layers_equal_the_written_out_layer_with_padded_memory():
    model = random_detr()
    grid, padding = padded_grid()
    dim = model.cfg.embed_dim
    memory = torch.randn(2, 20, dim, dtype=torch.float64)
    pos = model.stages[0].position_encoding(grid, padding)
    query_pos = model.decoder.query_embed.weight[None].expand(2, -1, -1)
    tgt = torch.randn(2, query_pos.shape[1], dim, dtype=torch.float64)
    expected, got = tgt, tgt
    with torch.no_grad():
        for layer in model.decoder.layers:
            expected = literal_decoder_layer(layer, expected, query_pos, memory, pos, padding.tokens())
            got = layer(got, query_pos, memory, pos, padding.tokens())
        torch.testing.assert_close(got, expected)
        before = model.decoder(memory, pos, padding.tokens())
        changed = memory.masked_fill(padding.tokens()[..., None], 1e3)  # padded memory is never read
        torch.testing.assert_close(model.decoder(changed, pos, padding.tokens()), before)
