"""Released state dicts written out from the authors' module structures (names and shapes),
filled with random non-zero values so a mis-mapped tensor changes the output."""

from __future__ import annotations

import torch


class Filler:
    """Random tensors from one seeded generator; ``meta=True`` gives shapes only."""

    def __init__(self, seed: int = 0, meta: bool = False) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.meta = meta

    def __call__(self, *shape: int, scale: float = 0.2, offset: float = 0.0) -> torch.Tensor:
        if self.meta:
            return torch.empty(shape, device="meta")
        return torch.randn(shape, generator=self.gen, dtype=torch.float64) * scale + offset


def _linear(sd: dict, fill: Filler, name: str, out: int, inp: int, bias: bool = True) -> None:
    sd[f"{name}.weight"] = fill(out, inp)
    if bias:
        sd[f"{name}.bias"] = fill(out, scale=0.05)


def _norm(sd: dict, fill: Filler, name: str, dim: int) -> None:
    sd[f"{name}.weight"] = fill(dim, scale=0.1, offset=1.0)
    sd[f"{name}.bias"] = fill(dim, scale=0.1)


def _mlp_block(sd: dict, fill: Filler, prefix: str, dim: int, hidden: int) -> None:
    _norm(sd, fill, f"{prefix}.norm2", dim)
    _linear(sd, fill, f"{prefix}.mlp.fc1", hidden, dim)
    _linear(sd, fill, f"{prefix}.mlp.fc2", dim, hidden)


def timm_vit(fill: Filler, dim: int, depth: int, patch: int, grid: int, classes: int, mlp_ratio: float = 4.0) -> dict:
    """timm's / DeiT's VisionTransformer (class token, pos_embed with its row, qkv with bias)."""
    sd = {"cls_token": fill(1, 1, dim), "pos_embed": fill(1, 1 + grid * grid, dim)}
    sd["patch_embed.proj.weight"] = fill(dim, 3, patch, patch)
    sd["patch_embed.proj.bias"] = fill(dim, scale=0.05)
    vit_blocks(sd, fill, dim, depth, int(dim * mlp_ratio))
    _norm(sd, fill, "norm", dim)
    _linear(sd, fill, "head", classes, dim)
    return sd


def vit_blocks(sd: dict, fill: Filler, dim: int, depth: int, hidden: int) -> None:
    """timm's ``blocks.N``: norm1, attn.qkv (with bias), attn.proj, norm2, mlp.fc1, mlp.fc2."""
    for i in range(depth):
        _norm(sd, fill, f"blocks.{i}.norm1", dim)
        _linear(sd, fill, f"blocks.{i}.attn.qkv", 3 * dim, dim)
        _linear(sd, fill, f"blocks.{i}.attn.proj", dim, dim)
        _mlp_block(sd, fill, f"blocks.{i}", dim, hidden)


def irpe_tables(
    sd: dict,
    fill: Filler,
    depth: int,
    heads: int,
    head_dim: int,
    on: str,
    buckets: int,
    shared: bool = True,
    mode: str = "contextual",
    cross: bool = False,
) -> dict:
    """Cream's ``rpe_{q,k,v}`` per block: q/k (H', d, K), v (H', K, d), bias (H', K); Cross splits rows/cols."""
    rows = 1 if shared else heads
    for i in range(depth):
        for target in on:
            parts = ("rp_rows.", "rp_cols.") if cross else ("",)
            for part in parts:
                name = f"blocks.{i}.attn.rpe_{target}.{part}"
                if mode == "bias":
                    sd[name + "lookup_table_bias"] = fill(rows, buckets, scale=0.5)
                elif target == "v":
                    sd[name + "lookup_table_weight"] = fill(rows, buckets, head_dim, scale=0.5)
                else:
                    sd[name + "lookup_table_weight"] = fill(rows, head_dim, buckets, scale=0.5)
    return sd


def lape_norms(sd: dict, fill: Filler, depth: int, dim: int) -> dict:
    """The LaPE authors' ``blocks.N.pe_norm`` LayerNorm."""
    for i in range(depth):
        _norm(sd, fill, f"blocks.{i}.pe_norm", dim)
    return sd


def lape_sin1d(rows: int, dim: int) -> torch.Tensor:
    """The LaPE authors' ``--pe 1D_sin`` table, computed as their code does (float32, no batch axis)."""
    table = torch.FloatTensor([[p / (10000 ** (2 * (i // 2) / dim)) for i in range(dim)] for p in range(rows)])
    table[:, 0::2] = torch.sin(table[:, 0::2])
    table[:, 1::2] = torch.cos(table[:, 1::2])
    return table


def swin_index(window: int) -> torch.Tensor:
    """Microsoft's relative_position_index buffer."""
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
    return rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]


def swin(
    fill: Filler,
    dims: tuple[int, ...],
    depths: tuple[int, ...],
    heads: tuple[int, ...],
    window: int,
    patch: int,
    img: int,
    classes: int,
    style: str = "microsoft",
) -> dict:
    """Microsoft's SwinTransformer (``style='microsoft'``, also timm < 0.9) or timm's (``'timm'``)."""
    sd: dict = {
        "patch_embed.proj.weight": fill(dims[0], 3, patch, patch),
        "patch_embed.proj.bias": fill(dims[0], scale=0.05),
    }
    _norm(sd, fill, "patch_embed.norm", dims[0])
    side = img // patch
    for s, (dim, depth, h) in enumerate(zip(dims, depths, heads, strict=True)):
        if style == "timm" and s > 0:
            _norm(sd, fill, f"layers.{s}.downsample.norm", 4 * dims[s - 1])
            _linear(sd, fill, f"layers.{s}.downsample.reduction", dim, 4 * dims[s - 1], bias=False)
        ws = min(window, side)
        for j in range(depth):
            p = f"layers.{s}.blocks.{j}"
            _norm(sd, fill, f"{p}.norm1", dim)
            sd[f"{p}.attn.relative_position_bias_table"] = fill((2 * ws - 1) ** 2, h, scale=0.5)
            if style == "microsoft":
                sd[f"{p}.attn.relative_position_index"] = (
                    swin_index(ws) if not fill.meta else torch.empty(ws * ws, ws * ws, device="meta")
                )
                if j % 2 and side > window:
                    sd[f"{p}.attn_mask"] = fill((side // ws) ** 2, ws * ws, ws * ws)
            _linear(sd, fill, f"{p}.attn.qkv", 3 * dim, dim)
            _linear(sd, fill, f"{p}.attn.proj", dim, dim)
            _mlp_block(sd, fill, p, dim, 4 * dim)
        if style == "microsoft" and s < len(dims) - 1:
            _norm(sd, fill, f"layers.{s}.downsample.norm", 4 * dim)
            _linear(sd, fill, f"layers.{s}.downsample.reduction", dims[s + 1], 4 * dim, bias=False)
            side //= 2
        elif style == "timm" and s < len(dims) - 1:
            side //= 2
    _norm(sd, fill, "norm", dims[-1])
    _linear(sd, fill, "head.fc" if style == "timm" else "head", classes, dims[-1])
    return sd


def pvt(
    fill: Filler,
    dims: tuple[int, ...],
    depths: tuple[int, ...],
    heads: tuple[int, ...],
    mlp_ratios: tuple[float, ...],
    sr_ratios: tuple[int, ...],
    patch: int,
    img: int,
    classes: int,
) -> dict:
    """whai362/PVT v1 (classification): per-stage patch_embed, pos_embed, blocks; class token last."""
    sd: dict = {}
    side, inp = img // patch, 3
    for s, (dim, depth, _heads, ratio, sr) in enumerate(
        zip(dims, depths, heads, mlp_ratios, sr_ratios, strict=True), start=1
    ):
        k = patch if s == 1 else 2
        sd[f"patch_embed{s}.proj.weight"] = fill(dim, inp, k, k)
        sd[f"patch_embed{s}.proj.bias"] = fill(dim, scale=0.05)
        _norm(sd, fill, f"patch_embed{s}.norm", dim)
        sd[f"pos_embed{s}"] = fill(1, side * side + (s == len(dims)), dim)
        for j in range(depth):
            p = f"block{s}.{j}"
            _norm(sd, fill, f"{p}.norm1", dim)
            _linear(sd, fill, f"{p}.attn.q", dim, dim)
            _linear(sd, fill, f"{p}.attn.kv", 2 * dim, dim)
            _linear(sd, fill, f"{p}.attn.proj", dim, dim)
            if sr > 1:
                sd[f"{p}.attn.sr.weight"] = fill(dim, dim, sr, sr)
                sd[f"{p}.attn.sr.bias"] = fill(dim, scale=0.05)
                _norm(sd, fill, f"{p}.attn.norm", dim)
            _mlp_block(sd, fill, p, dim, int(dim * ratio))
        inp, side = dim, side // 2
    sd["cls_token"] = fill(1, 1, dims[-1])
    _norm(sd, fill, "norm", dims[-1])
    _linear(sd, fill, "head", classes, dims[-1])
    return sd


def compact(
    fill: Filler,
    dim: int,
    depth: int,
    classes: int,
    tokens: int,
    conv: tuple[int, ...] | None,
    patch: int = 4,
    channels: int | None = None,
    mlp: int = 2,
) -> dict:
    """Compact Transformers' CCT (``conv``: each tokenizer layer's kernel; the layers ``channels`` wide, the last
    ``dim``) or CVT (``conv`` None: ``patch`` x ``patch`` patches) with ``tokens`` position rows; MLP ratio
    ``mlp``, no q/k/v biases."""
    sd: dict = {}
    if conv is None:
        sd["tokenizer.conv_layers.0.0.weight"] = fill(dim, 3, patch, patch)
        sd["tokenizer.conv_layers.0.0.bias"] = fill(dim, scale=0.05)
    else:
        widths = [3] + [channels or dim] * (len(conv) - 1) + [dim]
        for i, k in enumerate(conv):
            sd[f"tokenizer.conv_layers.{i}.0.weight"] = fill(widths[i + 1], widths[i], k, k)
    c = "classifier"
    sd[f"{c}.positional_emb"] = fill(1, tokens, dim)
    for i in range(depth):
        p = f"{c}.blocks.{i}"
        _norm(sd, fill, f"{p}.pre_norm", dim)
        _linear(sd, fill, f"{p}.self_attn.qkv", 3 * dim, dim, bias=False)
        _linear(sd, fill, f"{p}.self_attn.proj", dim, dim)
        _norm(sd, fill, f"{p}.norm1", dim)
        _linear(sd, fill, f"{p}.linear1", mlp * dim, dim)
        _linear(sd, fill, f"{p}.linear2", dim, mlp * dim)
    _norm(sd, fill, f"{c}.norm", dim)
    _linear(sd, fill, f"{c}.attention_pool", 1, dim)
    _linear(sd, fill, f"{c}.fc", classes, dim)
    return sd


def compact_vit_lite(fill: Filler, dim: int, depth: int, classes: int, grid: int, patch: int = 4) -> dict:
    """Compact Transformers' ViT-Lite: CVT's layout with ``class_emb``, a position row for it, no pooling."""
    sd = compact(fill, dim, depth, classes, 1 + grid * grid, None, patch)
    sd["classifier.class_emb"] = fill(1, 1, dim)
    del sd["classifier.attention_pool.weight"], sd["classifier.attention_pool.bias"]
    return sd


def deit_distilled(fill: Filler, dim: int, depth: int, patch: int, grid: int, classes: int) -> dict:
    """DeiT's DistilledVisionTransformer: timm's ViT plus ``dist_token``, a second position row and ``head_dist``."""
    sd = timm_vit(fill, dim, depth, patch, grid, classes)
    sd["dist_token"] = fill(1, 1, dim)
    sd["pos_embed"] = fill(1, 2 + grid * grid, dim)
    _linear(sd, fill, "head_dist", classes, dim)
    return sd


def t2t_vit(
    fill: Filler, dim: int, depth: int, token_dim: int, tokens: int, classes: int, layer: str, mlp: int = 2
) -> dict:
    """T2T-ViT: ``tokens_to_token`` with two performer (``w``: orthogonal random features) or transformer
    layers and ``project``, then timm's blocks without q/k/v biases (MLP ratio ``mlp``) and the fixed
    ``pos_embed``."""
    sd: dict = {}
    for name, width in (("attention1", 3 * 49), ("attention2", token_dim * 9)):
        p = f"tokens_to_token.{name}"
        _norm(sd, fill, f"{p}.norm1", width)
        _norm(sd, fill, f"{p}.norm2", token_dim)
        if layer == "performer":
            _linear(sd, fill, f"{p}.kqv", 3 * token_dim, width)
            _linear(sd, fill, f"{p}.proj", token_dim, token_dim)
            _linear(sd, fill, f"{p}.mlp.0", token_dim, token_dim)
            _linear(sd, fill, f"{p}.mlp.2", token_dim, token_dim)
            m = token_dim // 2
            sd[f"{p}.w"] = torch.linalg.qr(fill(token_dim, m, scale=1.0))[0].T.contiguous() * m**0.5
        else:
            _linear(sd, fill, f"{p}.attn.qkv", 3 * token_dim, width, bias=False)
            _linear(sd, fill, f"{p}.attn.proj", token_dim, token_dim)
            _linear(sd, fill, f"{p}.mlp.fc1", token_dim, token_dim)
            _linear(sd, fill, f"{p}.mlp.fc2", token_dim, token_dim)
    _linear(sd, fill, "tokens_to_token.project", dim, token_dim * 9)
    sd["cls_token"] = fill(1, 1, dim)
    sd["pos_embed"] = fill(1, 1 + tokens, dim)  # a fixed table in the release: the model recomputes it
    for i in range(depth):
        _norm(sd, fill, f"blocks.{i}.norm1", dim)
        _linear(sd, fill, f"blocks.{i}.attn.qkv", 3 * dim, dim, bias=False)
        _linear(sd, fill, f"blocks.{i}.attn.proj", dim, dim)
        _mlp_block(sd, fill, f"blocks.{i}", dim, mlp * dim)
    _norm(sd, fill, "norm", dim)
    _linear(sd, fill, "head", classes, dim)
    return sd


def _batch_norm(sd: dict, fill: Filler, name: str, channels: int) -> None:
    _norm(sd, fill, name, channels)
    sd[f"{name}.running_mean"] = fill(channels, scale=0.1)
    sd[f"{name}.running_var"] = fill(channels, scale=0.1, offset=1.0).abs()
    sd[f"{name}.num_batches_tracked"] = torch.tensor(7)


def ceit(fill: Filler, dim: int, depth: int, patch: int, grid: int, classes: int, stem: int = 8) -> dict:
    """coeusguo/ceit's CeIT: Image2Tokens (conv, bn) and its patch proj, LeFF blocks, the LCA block, MLP ratio 4."""
    hidden = 4 * dim
    sd: dict = {"i2t.backbone.conv.weight": fill(stem, 3, 7, 7)}
    _batch_norm(sd, fill, "i2t.backbone.bn", stem)
    sd["i2t.proj.weight"] = fill(dim, stem, patch, patch)
    sd["i2t.proj.bias"] = fill(dim, scale=0.05)
    sd["cls_token"] = fill(1, 1, dim)
    sd["pos_embed"] = fill(1, 1 + grid * grid, dim)
    for i in range(depth):
        p = f"blocks.{i}"
        _norm(sd, fill, f"{p}.norm1", dim)
        _linear(sd, fill, f"{p}.attn.qkv", 3 * dim, dim)
        _linear(sd, fill, f"{p}.attn.proj", dim, dim)
        _norm(sd, fill, f"{p}.norm2", dim)
        for conv, (out, inp, k, groups) in {
            "conv1": (hidden, dim, 1, 1), "conv2": (hidden, hidden, 3, hidden), "conv3": (dim, hidden, 1, 1)
        }.items():  # fmt: skip
            sd[f"{p}.leff.{conv}.weight"] = fill(out, inp // groups, k, k)
            sd[f"{p}.leff.{conv}.bias"] = fill(out, scale=0.05)
        for bn, channels in (("bn1", hidden), ("bn2", hidden), ("bn3", dim)):
            _batch_norm(sd, fill, f"{p}.leff.{bn}", channels)
    _norm(sd, fill, "lca.norm1", dim)
    _linear(sd, fill, "lca.attn.qkv", 3 * dim, dim)
    _linear(sd, fill, "lca.attn.proj", dim, dim)
    _norm(sd, fill, "lca.norm2", dim)
    _linear(sd, fill, "lca.feedforward.fc1", hidden, dim)
    _linear(sd, fill, "lca.feedforward.fc2", dim, hidden)
    sd["pos_layer_embed"] = fill(1, depth, dim)
    _norm(sd, fill, "norm", dim)
    _linear(sd, fill, "head", classes, dim)
    return sd


def cct_sine(tokens: int, dim: int) -> torch.Tensor:
    """CCT's ``sinusoidal_embedding``: position p, channel i at p / 10000^(2 (i // 2) / dim), sin on even
    channels, cos on odd; a (1, tokens, dim) table its sine models store as ``positional_emb``."""
    pe = torch.tensor([[p / 10000 ** (2 * (i // 2) / dim) for i in range(dim)] for p in range(tokens)])
    pe[:, 0::2] = torch.sin(pe[:, 0::2])
    pe[:, 1::2] = torch.cos(pe[:, 1::2])
    return pe[None]
