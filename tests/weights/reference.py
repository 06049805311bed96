"""The released forward passes, written out literally from the authors' code (float64, eval mode).

Nothing here imports vitpos: each function reads a released state dict by its own names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F


def ln(x: torch.Tensor, sd: dict, name: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], sd[f"{name}.weight"], sd[f"{name}.bias"], eps)


def linear(x: torch.Tensor, sd: dict, name: str) -> torch.Tensor:
    return F.linear(x, sd[f"{name}.weight"], sd.get(f"{name}.bias"))


def mlp(x: torch.Tensor, sd: dict, prefix: str) -> torch.Tensor:
    return linear(F.gelu(linear(x, sd, f"{prefix}.mlp.fc1")), sd, f"{prefix}.mlp.fc2")


# --- Cream's iRPE (irpe.py): bucket ids ------------------------------------------------------


def cream_piecewise(rp: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    rp_abs = rp.abs()
    not_mask = ~(rp_abs <= alpha)
    rp_out, rp_abs_out = rp[not_mask], rp_abs[not_mask]
    y_out = (
        torch.sign(rp_out)
        * (alpha + torch.log(rp_abs_out / alpha) / math.log(gamma / alpha) * (beta - alpha)).round().clip(max=beta)
    ).to(torch.long)
    idx = rp.clone()
    if idx.dtype in (torch.float32, torch.float64):
        idx = idx.round().to(torch.long)
    idx[not_mask] = y_out
    return idx


def cream_buckets(method: str, height: int, width: int, ratio: float, skip: int) -> tuple[torch.Tensor, int]:
    """get_bucket_ids_2d: (skip + L, skip + L) ids and the bucket count (method: euc, quant, product, rows, cols)."""
    alpha, beta, gamma = ratio, 2 * ratio, 8 * ratio
    rows = torch.arange(height).view(height, 1).repeat(1, width)
    cols = torch.arange(width).view(1, width).repeat(height, 1)
    pos = torch.stack([rows, cols], 2).view(-1, 2)
    diff = pos[:, None, :] - pos[None, :, :]
    beta_int = int(beta)
    kw = dict(alpha=alpha, beta=beta, gamma=gamma)
    if method == "euc":
        ids = cream_piecewise(diff.square().sum(2).float().sqrt().round(), **kw)
    elif method == "quant":
        ids = cream_piecewise(diff.square().sum(2), **kw)
    elif method == "product":
        s = 2 * beta_int + 1
        ids = (cream_piecewise(diff[:, :, 0], **kw) + beta_int) * s + cream_piecewise(diff[:, :, 1], **kw) + beta_int
    else:
        ids = cream_piecewise(diff[:, :, 0 if method == "rows" else 1], **kw)
    if method != "product":
        ids = ids + beta_int
    count = (2 * beta_int + 1) ** 2 if method == "product" else 2 * beta_int + 1
    if skip:
        full = ids.new_full((skip + ids.shape[0], skip + ids.shape[0]), count)
        full[skip:, skip:] = ids
        ids, count = full, count + 1
    return ids, count


def cream_rpe_transposed(x: torch.Tensor, sd: dict, name: str, ids: dict) -> torch.Tensor:
    """iRPE.forward_rpe_transpose (q/k): (B, H, L, L); Cross sums rp_rows and rp_cols."""
    if f"{name}.lookup_table_weight" not in sd and f"{name}.lookup_table_bias" not in sd:
        return cream_rpe_transposed(x, sd, f"{name}.rp_rows", ids) + cream_rpe_transposed(x, sd, f"{name}.rp_cols", ids)
    bucket = ids[name.rsplit(".", 1)[-1] if name.endswith(("rp_rows", "rp_cols")) else "main"]
    if f"{name}.lookup_table_bias" in sd:
        table = sd[f"{name}.lookup_table_bias"]
        return table[:, bucket.flatten()].view(1, table.shape[0], *bucket.shape)
    lookup = x @ sd[f"{name}.lookup_table_weight"]  # B, H, L, K (H' = 1 broadcasts)
    return torch.gather(lookup, -1, bucket.expand(*lookup.shape[:2], *bucket.shape))


def cream_rpe_value(attn: torch.Tensor, sd: dict, name: str, ids: dict) -> torch.Tensor:
    """iRPE.forward_rpe_no_transpose (v): sum_j attn_ij table[I(i, j)]."""
    if f"{name}.lookup_table_weight" not in sd:
        return cream_rpe_value(attn, sd, f"{name}.rp_rows", ids) + cream_rpe_value(attn, sd, f"{name}.rp_cols", ids)
    bucket = ids[name.rsplit(".", 1)[-1] if name.endswith(("rp_rows", "rp_cols")) else "main"]
    table = sd[f"{name}.lookup_table_weight"]  # H', K, d
    weight = table[:, bucket]  # H', L, L, d
    return torch.einsum("bhij,hijd->bhid", attn, weight.expand(attn.shape[1], -1, -1, -1))


# --- timm / DeiT / Cream RPE / LaPE ViT ------------------------------------------------------


def vit(
    sd: dict,
    x: torch.Tensor,
    heads: int,
    ids: dict | None = None,
    lape: bool = False,
    share: bool = False,
    chained: bool = True,
) -> torch.Tensor:
    """timm 0.3.2's VisionTransformer as in DeiT, Cream's RPEAttention when ``ids`` is given, and
    the LaPE authors' pe_norm when ``lape``: chained as in their current code (``--join-type LaPE``),
    or with ``chained=False`` the same pos_embed normalised in every block as in their first releases
    (``--pe_joining LaPE``). ``share``: their ``--join-type share``, pos_embed added to every block's input.
    A (1 + N, D) pos_embed (their ``--pe 1D_sin``) broadcasts as in their code."""
    w = sd["patch_embed.proj.weight"]
    x = F.conv2d(x, w, sd["patch_embed.proj.bias"], stride=w.shape[-1]).flatten(2).transpose(1, 2)
    x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1)
    pos = sd["pos_embed"]
    if not (lape or share):
        x = x + pos
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    for i in range(depth):
        p = f"blocks.{i}"
        if share:
            x = x + pos
        h = ln(x, sd, f"{p}.norm1", 1e-6)
        if lape:
            pos = ln(pos if chained else sd["pos_embed"], sd, f"{p}.pe_norm", 1e-6)
            h = h + pos
        x = x + cream_attention(h, sd, p, heads, ids)
        x = x + mlp(ln(x, sd, f"{p}.norm2", 1e-6), sd, p)
    x = ln(x, sd, "norm", 1e-6)
    return linear(x[:, 0], sd, "head")


def cream_attention(x: torch.Tensor, sd: dict, p: str, heads: int, ids: dict | None) -> torch.Tensor:
    """RPEAttention.forward (plain timm attention when there are no rpe tables)."""
    b, n, c = x.shape
    qkv = linear(x, sd, f"{p}.attn.qkv").reshape(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    scale = (c // heads) ** -0.5
    q = q * scale
    attn = q @ k.transpose(-2, -1)
    has = lambda t: any(key.startswith(f"{p}.attn.rpe_{t}.") for key in sd)  # noqa: E731
    if ids is not None and has("k"):
        attn = attn + cream_rpe_transposed(q, sd, f"{p}.attn.rpe_k", ids)
    if ids is not None and has("q"):
        attn = attn + cream_rpe_transposed(k * scale, sd, f"{p}.attn.rpe_q", ids).transpose(2, 3)
    attn = attn.softmax(dim=-1)
    out = attn @ v
    if ids is not None and has("v"):
        out = out + cream_rpe_value(attn, sd, f"{p}.attn.rpe_v", ids)
    return linear(out.transpose(1, 2).reshape(b, n, c), sd, f"{p}.attn.proj")


# --- Microsoft's Swin ------------------------------------------------------------------------


def _windows(x: torch.Tensor, ws: int) -> torch.Tensor:
    b, h, w, c = x.shape
    return x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)


def _unwindows(x: torch.Tensor, ws: int, h: int, w: int) -> torch.Tensor:
    b = x.shape[0] // ((h // ws) * (w // ws))
    return x.view(b, h // ws, w // ws, ws, ws, -1).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, -1)


def _shift_mask(h: int, w: int, ws: int, shift: int) -> torch.Tensor:
    img = torch.zeros(1, h, w, 1)
    cnt = 0
    for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img[:, hs, wsl, :] = cnt
            cnt += 1
    mw = _windows(img, ws).squeeze(-1)
    mask = mw[:, None, :] - mw[:, :, None]
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0).double()


def swin_stem(sd: dict, x: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """Swin's patch embedding and its norm: tokens (B, H*W, C) and the grid's sides."""
    w = sd["patch_embed.proj.weight"]
    x = F.conv2d(x, w, sd["patch_embed.proj.bias"], stride=w.shape[-1])
    h, wd = x.shape[-2:]
    return ln(x.flatten(2).transpose(1, 2), sd, "patch_embed.norm", 1e-5), h, wd


def swin(
    sd: dict,
    x: torch.Tensor,
    depths: tuple[int, ...],
    heads: tuple[int, ...],
    window: int,
    style: str,
    attention: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:
    """SwinTransformer.forward (Microsoft); ``style='timm'`` reads timm's names for merging and head;
    ``attention`` replaces the window attention (same arguments as ``_swin_attention``)."""
    b = x.shape[0]
    x, h, wd = swin_stem(sd, x)
    for s, depth in enumerate(depths):
        if style == "timm" and s > 0:
            x, h, wd = _merge(x, sd, f"layers.{s}.downsample", h, wd)
        ws, shift_base = window, window // 2
        if min(h, wd) <= window:
            ws, shift_base = min(h, wd), 0
        for j in range(depth):
            p = f"layers.{s}.blocks.{j}"
            shift = shift_base if j % 2 else 0
            shortcut = x
            y = ln(x, sd, f"{p}.norm1", 1e-5).view(b, h, wd, -1)
            if shift:
                y = torch.roll(y, shifts=(-shift, -shift), dims=(1, 2))
            win = _windows(y, ws)
            mask = _shift_mask(h, wd, ws, shift) if shift else None
            win = (attention or _swin_attention)(win, sd, p, heads[s], ws, mask)
            y = _unwindows(win, ws, h, wd)
            if shift:
                y = torch.roll(y, shifts=(shift, shift), dims=(1, 2))
            x = shortcut + y.reshape(b, h * wd, -1)
            x = x + mlp(ln(x, sd, f"{p}.norm2", 1e-5), sd, p)
        if style == "microsoft" and s < len(depths) - 1:
            x, h, wd = _merge(x, sd, f"layers.{s}.downsample", h, wd)
    x = ln(x, sd, "norm", 1e-5).mean(1)
    return linear(x, sd, "head.fc" if style == "timm" else "head")


def _swin_attention(x: torch.Tensor, sd: dict, p: str, heads: int, ws: int, mask: torch.Tensor | None) -> torch.Tensor:
    bw, n, c = x.shape
    qkv = linear(x, sd, f"{p}.attn.qkv").reshape(bw, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * (c // heads) ** -0.5, qkv[1], qkv[2]
    attn = q @ k.transpose(-2, -1)
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
    index = rel[:, :, 0] * (2 * ws - 1) + rel[:, :, 1]
    bias = sd[f"{p}.attn.relative_position_bias_table"][index.view(-1)].view(n, n, -1).permute(2, 0, 1)
    out = with_window_mask(attn + bias.unsqueeze(0), mask).softmax(-1) @ v
    return linear(out.transpose(1, 2).reshape(bw, n, c), sd, f"{p}.attn.proj")


def with_window_mask(attn: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits (B * windows, heads, N, N) plus each image's per-window mask (windows, N, N), if any."""
    if mask is None:
        return attn
    bw, heads, n, _ = attn.shape
    nw = mask.shape[0]
    return (attn.view(bw // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)).view(-1, heads, n, n)


def _merge(x: torch.Tensor, sd: dict, p: str, h: int, w: int) -> tuple[torch.Tensor, int, int]:
    b, _, c = x.shape
    x = x.view(b, h, w, c)
    x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1).view(b, -1, 4 * c)
    return linear(ln(x, sd, f"{p}.norm", 1e-5), sd, f"{p}.reduction"), h // 2, w // 2


# --- PVT v1 ----------------------------------------------------------------------------------


def pvt(sd: dict, x: torch.Tensor, heads: tuple[int, ...], sr_ratios: tuple[int, ...]) -> torch.Tensor:
    """PyramidVisionTransformer.forward (v1, classification)."""
    b = x.shape[0]
    stages = len(heads)
    for s in range(1, stages + 1):
        w = sd[f"patch_embed{s}.proj.weight"]
        x = F.conv2d(x, w, sd[f"patch_embed{s}.proj.bias"], stride=w.shape[-1])
        h, wd = x.shape[-2:]
        x = ln(x.flatten(2).transpose(1, 2), sd, f"patch_embed{s}.norm", 1e-5)
        if s == stages:
            x = torch.cat([sd["cls_token"].expand(b, -1, -1), x], dim=1)
        x = x + sd[f"pos_embed{s}"]
        depth = len({k.split(".")[1] for k in sd if k.startswith(f"block{s}.")})
        for j in range(depth):
            p = f"block{s}.{j}"
            x = x + _sra(ln(x, sd, f"{p}.norm1", 1e-6), sd, p, heads[s - 1], sr_ratios[s - 1], h, wd)
            x = x + mlp(ln(x, sd, f"{p}.norm2", 1e-6), sd, p)
        if s != stages:
            x = x.reshape(b, h, wd, -1).permute(0, 3, 1, 2)
    x = ln(x, sd, "norm", 1e-6)
    return linear(x[:, 0], sd, "head")


def _sra(x: torch.Tensor, sd: dict, p: str, heads: int, sr: int, h: int, w: int) -> torch.Tensor:
    b, n, c = x.shape
    q = linear(x, sd, f"{p}.attn.q").reshape(b, n, heads, c // heads).permute(0, 2, 1, 3)
    if sr > 1:
        y = x.permute(0, 2, 1).reshape(b, c, h, w)
        y = (
            F.conv2d(y, sd[f"{p}.attn.sr.weight"], sd[f"{p}.attn.sr.bias"], stride=sr)
            .reshape(b, c, -1)
            .permute(0, 2, 1)
        )
        y = ln(y, sd, f"{p}.attn.norm", 1e-5)
    else:
        y = x
    kv = linear(y, sd, f"{p}.attn.kv").reshape(b, -1, 2, heads, c // heads).permute(2, 0, 3, 1, 4)
    k, v = kv[0], kv[1]
    attn = ((q @ k.transpose(-2, -1)) * (c // heads) ** -0.5).softmax(-1)
    return linear((attn @ v).transpose(1, 2).reshape(b, n, c), sd, f"{p}.attn.proj")


# --- timm's resizing on load (timm/layers/pos_embed.py, pos_embed_rel.py) ----------------------


def timm_resample_pos_embed(posemb: torch.Tensor, new_side: int, num_prefix_tokens: int) -> torch.Tensor:
    """resample_abs_pos_embed: float32, bicubic with antialias, prefix rows kept."""
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    old_side, dim = int(math.sqrt(grid.shape[1])), grid.shape[-1]
    maps = grid.float().reshape(1, old_side, old_side, dim).permute(0, 3, 1, 2)
    maps = F.interpolate(maps, size=(new_side, new_side), mode="bicubic", antialias=True)
    return torch.cat([prefix, maps.permute(0, 2, 3, 1).reshape(1, -1, dim).to(posemb.dtype)], dim=1)


def timm_resize_bias_table(table: torch.Tensor, new_window: int) -> torch.Tensor:
    """resize_rel_pos_bias_table for a flat (positions, heads) table: geometric source offsets,
    linear interpolation per head, one target point at a time."""
    src, dst = int(math.sqrt(table.shape[0])), 2 * new_window - 1
    left, right = 1.01, 1.5
    while right - left > 1e-6:
        q = (left + right) / 2.0
        if (1.0 - q ** (src // 2)) / (1.0 - q) > dst // 2:
            right = q
        else:
            left = q
    dis, cur = [], 1.0
    for i in range(src // 2):
        dis.append(cur)
        cur += q ** (i + 1)
    points = [-d for d in reversed(dis)] + [0.0] + dis

    def weights(t: float) -> list[tuple[int, float]]:
        if t <= points[0]:
            return [(0, 1.0)]
        if t >= points[-1]:
            return [(len(points) - 1, 1.0)]
        j = next(i for i, p in enumerate(points) if p >= t)
        if points[j] == t:
            return [(j, 1.0)]
        span = points[j] - points[j - 1]
        return [(j - 1, (points[j] - t) / span), (j, (t - points[j - 1]) / span)]

    half = dst // 2
    out = torch.zeros(dst * dst, table.shape[1], dtype=torch.float64)
    for y in range(dst):
        for x in range(dst):
            for iy, wy in weights(float(y - half)):
                for ix, wx in weights(float(x - half)):
                    out[y * dst + x] += wy * wx * table[iy * src + ix].double()
    return out


def compact(sd: dict, x: torch.Tensor, heads: int, conv: tuple[int, ...] | None) -> torch.Tensor:
    """Compact Transformers' CCT (Tokenizer with ReLU and max-pool; ``conv``: the kernels) or ViT-Lite /
    CVT (``conv`` None: a patch convolution), then TransformerClassifier: the learned embedding, the
    encoder layers (norm1 on the residual stream), the final norm, sequence pooling or the class token."""
    if conv is None:
        w = sd["tokenizer.conv_layers.0.0.weight"]
        x = F.conv2d(x, w, sd["tokenizer.conv_layers.0.0.bias"], stride=w.shape[-1])
    else:
        for i, k in enumerate(conv):
            stride, padding = max(1, k // 2 - 1), max(1, k // 2)
            x = F.conv2d(x, sd[f"tokenizer.conv_layers.{i}.0.weight"], None, stride=stride, padding=padding)
            x = F.max_pool2d(F.relu(x), 3, 2, 1)
    x = x.flatten(2).transpose(-2, -1)
    c = "classifier"
    seq_pool = f"{c}.class_emb" not in sd
    if not seq_pool:
        x = torch.cat([sd[f"{c}.class_emb"].expand(x.shape[0], -1, -1), x], dim=1)
    x = x + sd[f"{c}.positional_emb"]
    depth = len({k.split(".")[2] for k in sd if k.startswith(f"{c}.blocks.")})
    for i in range(depth):
        p = f"{c}.blocks.{i}"
        h = ln(x, sd, f"{p}.pre_norm", 1e-5)
        b, n, d = h.shape
        qkv = linear(h, sd, f"{p}.self_attn.qkv").reshape(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        attn = (qkv[0] @ qkv[1].transpose(-2, -1)) * (d // heads) ** -0.5
        out = (attn.softmax(dim=-1) @ qkv[2]).transpose(1, 2).reshape(b, n, d)
        x = ln(x + linear(out, sd, f"{p}.self_attn.proj"), sd, f"{p}.norm1", 1e-5)
        x = x + linear(F.gelu(linear(x, sd, f"{p}.linear1")), sd, f"{p}.linear2")
    x = ln(x, sd, f"{c}.norm", 1e-5)
    if seq_pool:
        x = (F.softmax(linear(x, sd, f"{c}.attention_pool"), dim=1).transpose(-1, -2) @ x).squeeze(-2)
    else:
        x = x[:, 0]
    return linear(x, sd, f"{c}.fc")


def deit_distilled(sd: dict, x: torch.Tensor, heads: int, training: bool = False):
    """DeiT's DistilledVisionTransformer: class and distillation tokens, the position table over both;
    (head, head_dist) logits in training, their mean at inference."""
    w = sd["patch_embed.proj.weight"]
    x = F.conv2d(x, w, sd["patch_embed.proj.bias"], stride=w.shape[-1]).flatten(2).transpose(1, 2)
    prefix = [sd[k].expand(x.shape[0], -1, -1) for k in ("cls_token", "dist_token")]
    x = torch.cat([*prefix, x], dim=1) + sd["pos_embed"]
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    for i in range(depth):
        p = f"blocks.{i}"
        x = x + cream_attention(ln(x, sd, f"{p}.norm1", 1e-6), sd, p, heads, None)
        x = x + mlp(ln(x, sd, f"{p}.norm2", 1e-6), sd, p)
    x = ln(x, sd, "norm", 1e-6)
    logits, dist_logits = linear(x[:, 0], sd, "head"), linear(x[:, 1], sd, "head_dist")
    return (logits, dist_logits) if training else (logits + dist_logits) / 2


def _t2t_sinusoid(n_position: int, d_hid: int) -> torch.Tensor:
    """T2T-ViT's get_sinusoid_encoding: position / 10000^(2 (j // 2) / d), sin on even j, cos on odd."""
    angles = torch.tensor(
        [[pos / math.pow(10000, 2 * (j // 2) / d_hid) for j in range(d_hid)] for pos in range(n_position)],
        dtype=torch.float64,
    )
    angles[:, 0::2] = torch.sin(angles[:, 0::2])
    angles[:, 1::2] = torch.cos(angles[:, 1::2])
    return angles[None]


def _token_performer(x: torch.Tensor, sd: dict, p: str) -> torch.Tensor:
    """Token_performer.forward (its float32 casts left out: float64 throughout)."""
    x = ln(x, sd, f"{p}.norm1", 1e-5)
    emb = sd[f"{p}.proj.weight"].shape[0]
    k, q, v = torch.split(linear(x, sd, f"{p}.kqv"), emb, dim=-1)
    w = sd[f"{p}.w"]
    m = w.shape[0]

    def prm_exp(t: torch.Tensor) -> torch.Tensor:
        xd = ((t * t).sum(dim=-1, keepdim=True)).repeat(1, 1, m) / 2
        return torch.exp(torch.einsum("bti,mi->btm", t, w) - xd) / math.sqrt(m)

    kp, qp = prm_exp(k), prm_exp(q)
    d = torch.einsum("bti,bi->bt", qp, kp.sum(dim=1)).unsqueeze(dim=2)
    kptv = torch.einsum("bin,bim->bnm", v, kp)
    y = torch.einsum("bti,bni->btn", qp, kptv) / (d.repeat(1, 1, emb) + 1e-8)
    y = v + linear(y, sd, f"{p}.proj")
    return y + linear(F.gelu(linear(ln(y, sd, f"{p}.norm2", 1e-5), sd, f"{p}.mlp.0")), sd, f"{p}.mlp.2")


def _token_transformer(x: torch.Tensor, sd: dict, p: str) -> torch.Tensor:
    """Token_transformer.forward: one head, logits scaled by the input width, v as the skip connection."""
    b, n, c = x.shape
    h = ln(x, sd, f"{p}.norm1", 1e-5)
    in_dim = sd[f"{p}.attn.proj.weight"].shape[0]
    qkv = linear(h, sd, f"{p}.attn.qkv").reshape(b, n, 3, 1, in_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = ((q * c**-0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    out = (attn @ v).transpose(1, 2).reshape(b, n, in_dim)
    y = v.squeeze(1) + linear(out, sd, f"{p}.attn.proj")
    return y + mlp(ln(y, sd, f"{p}.norm2", 1e-5), sd, p)


def t2t_vit(sd: dict, x: torch.Tensor, heads: int) -> torch.Tensor:
    """T2T_ViT.forward: T2T_module (soft splits, two token layers, re-structurisation by the square
    root of the token count), the class token, the sinusoidal table over 1 + N positions, timm blocks."""
    layer = _token_performer if "tokens_to_token.attention1.w" in sd else _token_transformer
    x = F.unfold(x, (7, 7), stride=(4, 4), padding=(2, 2)).transpose(1, 2)
    for name in ("attention1", "attention2"):
        x = layer(x, sd, f"tokens_to_token.{name}")
        b, hw, c = x.shape
        side = int(math.sqrt(hw))
        x = F.unfold(x.transpose(1, 2).reshape(b, c, side, side), (3, 3), stride=(2, 2), padding=(1, 1)).transpose(1, 2)
    x = linear(x, sd, "tokens_to_token.project")
    x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1)
    x = x + _t2t_sinusoid(x.shape[1], x.shape[2])
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    for i in range(depth):
        p = f"blocks.{i}"
        x = x + cream_attention(ln(x, sd, f"{p}.norm1", 1e-5), sd, p, heads, None)
        x = x + mlp(ln(x, sd, f"{p}.norm2", 1e-5), sd, p)
    return linear(ln(x, sd, "norm", 1e-5)[:, 0], sd, "head")


def _bn(x: torch.Tensor, sd: dict, name: str) -> torch.Tensor:
    return F.batch_norm(
        x, sd[f"{name}.running_mean"], sd[f"{name}.running_var"], sd[f"{name}.weight"], sd[f"{name}.bias"], False
    )


def ceit(sd: dict, x: torch.Tensor, heads: int) -> torch.Tensor:
    """coeusguo/ceit's CeIT.forward in eval mode: Image2Tokens and HybridEmbed's proj, LeFF blocks (the class
    token bypasses LeFF; the patch map is the square root of the token count), LCA over the blocks' class tokens."""
    x = _bn(F.conv2d(x, sd["i2t.backbone.conv.weight"], None, stride=2, padding=3), sd, "i2t.backbone.bn")
    x = F.max_pool2d(x, 3, 2, 1)
    w = sd["i2t.proj.weight"]
    x = F.conv2d(x, w, sd["i2t.proj.bias"], stride=w.shape[-1]).flatten(2).transpose(1, 2)
    x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1) + sd["pos_embed"]
    depth = sd["pos_layer_embed"].shape[1]
    cls_tokens = []
    for i in range(depth):
        p = f"blocks.{i}"
        x = x + cream_attention(ln(x, sd, f"{p}.norm1", 1e-6), sd, p, heads, None)
        h = ln(x, sd, f"{p}.norm2", 1e-6)
        b, n, k = h.shape
        cls, tokens = torch.split(h, [1, n - 1], dim=1)
        side = int(math.sqrt(n - 1))
        y = tokens.reshape(b, side, side, k).permute(0, 3, 1, 2)
        y = F.gelu(_bn(F.conv2d(y, sd[f"{p}.leff.conv1.weight"], sd[f"{p}.leff.conv1.bias"]), sd, f"{p}.leff.bn1"))
        hidden = y.shape[1]
        y = F.conv2d(y, sd[f"{p}.leff.conv2.weight"], sd[f"{p}.leff.conv2.bias"], padding=1, groups=hidden)
        y = F.gelu(_bn(y, sd, f"{p}.leff.bn2"))
        y = _bn(F.conv2d(y, sd[f"{p}.leff.conv3.weight"], sd[f"{p}.leff.conv3.bias"]), sd, f"{p}.leff.bn3")
        x = x + torch.cat([cls, y.flatten(2).permute(0, 2, 1)], dim=1)
        cls_tokens.append(x[:, 0])
    layers = torch.stack(cls_tokens, dim=1) + sd["pos_layer_embed"]
    b, n, c = layers.shape
    h = ln(layers, sd, "lca.norm1", 1e-6)
    wq, wkv = sd["lca.attn.qkv.weight"][:c], sd["lca.attn.qkv.weight"][c:]
    bq, bkv = sd["lca.attn.qkv.bias"][:c], sd["lca.attn.qkv.bias"][c:]
    q = F.linear(h[:, -1:], wq, bq).reshape(b, 1, heads, c // heads).permute(0, 2, 1, 3)
    kv = F.linear(h, wkv, bkv).reshape(b, n, 2, heads, c // heads).permute(2, 0, 3, 1, 4)
    attn = ((q @ kv[0].transpose(-2, -1)) * (c // heads) ** -0.5).softmax(dim=-1)
    out = linear((attn @ kv[1]).transpose(1, 2).reshape(b, 1, c), sd, "lca.attn.proj")
    y = layers[:, -1:] + out
    h2 = ln(y, sd, "lca.norm2", 1e-6)
    y = y + linear(F.gelu(linear(h2, sd, "lca.feedforward.fc1")), sd, "lca.feedforward.fc2")
    return linear(ln(y, sd, "norm", 1e-6).view(b, -1), sd, "head")
