"""Swin V2 (Liu et al., CVPR 2022) written out from the paper's equations and the released code's maths.

Nothing here imports vitpos. :func:`swinv2_state` writes a state dict in Microsoft's layout (merging
ends a stage; buffers ``relative_coords_table``, ``relative_position_index``, ``attn_mask``) or
timm's (merging starts a stage, ``head.fc``, no buffers); :func:`swinv2_forward` is the released
forward pass in float64 (eval mode), windows and shifts per axis as the release shrinks them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .layouts import Filler, _linear, _mlp_block, _norm
from .reference import linear, ln, mlp, swin_stem, with_window_mask

LOG_SCALE_MAX = math.log(1 / 0.01)


def log_coords(window: tuple[int, int], pretrained: int | None = None) -> torch.Tensor:
    """((2wh-1)(2ww-1), 2): every offset (dy, dx), row-major, normalised by (window or pretrained) - 1,
    times 8, then sign(u) log2(|u| + 1) / log2(8); one entry at a time."""
    wh, ww = window
    spans = (pretrained, pretrained) if pretrained else (wh, ww)
    rows = []
    for dy in range(-(wh - 1), wh):
        for dx in range(-(ww - 1), ww):
            entry = []
            for d, span in ((dy, spans[0]), (dx, spans[1])):
                u = 8.0 * d / max(span - 1, 1)
                entry.append(math.copysign(math.log2(abs(u) + 1.0) / math.log2(8.0), u) if u else 0.0)
            rows.append(entry)
    return torch.tensor(rows, dtype=torch.float64)


def offset_index(window: tuple[int, int]) -> torch.Tensor:
    """(N, N) row of :func:`log_coords` for every (query, key) pair of a window, pair by pair."""
    wh, ww = window
    cells = [(y, x) for y in range(wh) for x in range(ww)]
    return torch.tensor([[(a[0] - b[0] + wh - 1) * (2 * ww - 1) + a[1] - b[1] + ww - 1 for b in cells] for a in cells])


def cpb_bias(sd: dict, prefix: str, window: tuple[int, int], pretrained: int | None = None) -> torch.Tensor:
    """16 sigmoid(MLP(log_coords))[index]: (heads, N, N)."""
    hidden = F.relu(F.linear(log_coords(window, pretrained), sd[f"{prefix}.0.weight"], sd[f"{prefix}.0.bias"]))
    table = F.linear(hidden, sd[f"{prefix}.2.weight"])  # offsets, heads
    return 16 * torch.sigmoid(table[offset_index(window)]).permute(2, 0, 1)


def _stage_window(side: tuple[int, int], window: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The release's per-axis rule: an axis that fits in one window becomes one window, unshifted."""
    wins = tuple(min(window, s) for s in side)
    shifts = tuple(0 if s <= window else window // 2 for s in side)
    return wins, shifts  # type: ignore[return-value]


def swinv2_state(
    fill: Filler,
    dims: tuple[int, ...],
    depths: tuple[int, ...],
    heads: tuple[int, ...],
    window: int,
    patch: int,
    img: tuple[int, int],
    classes: int,
    style: str = "microsoft",
    pretrained: int | None = None,
) -> dict:
    """A Swin V2 state dict in Microsoft's (``style='microsoft'``) or timm's layout, trained at ``img``."""
    sd: dict = {"patch_embed.proj.weight": fill(dims[0], 3, patch, patch), "patch_embed.proj.bias": fill(dims[0])}
    _norm(sd, fill, "patch_embed.norm", dims[0])
    side = (img[0] // patch, img[1] // patch)
    for s, (dim, depth, h) in enumerate(zip(dims, depths, heads, strict=True)):
        if style == "timm" and s > 0:
            _linear(sd, fill, f"layers.{s}.downsample.reduction", dim, 4 * dims[s - 1], bias=False)
            _norm(sd, fill, f"layers.{s}.downsample.norm", dim)
        wins, shifts = _stage_window(side, window)
        for j in range(depth):
            p = f"layers.{s}.blocks.{j}"
            sd[f"{p}.attn.logit_scale"] = fill(h, 1, 1, scale=0.5, offset=math.log(10))
            if not fill.meta:
                sd[f"{p}.attn.logit_scale"][0] = math.log(200.0)  # above the clamp at log(100)
            sd[f"{p}.attn.q_bias"] = fill(dim)
            sd[f"{p}.attn.v_bias"] = fill(dim)
            sd[f"{p}.attn.cpb_mlp.0.weight"] = fill(512, 2, scale=1.0)
            sd[f"{p}.attn.cpb_mlp.0.bias"] = fill(512, scale=0.5)
            sd[f"{p}.attn.cpb_mlp.2.weight"] = fill(h, 512, scale=0.1)
            sd[f"{p}.attn.qkv.weight"] = fill(3 * dim, dim)
            _linear(sd, fill, f"{p}.attn.proj", dim, dim)
            _norm(sd, fill, f"{p}.norm1", dim)
            _mlp_block(sd, fill, p, dim, 4 * dim)
            if style == "microsoft":
                coords = log_coords(wins, pretrained).float().reshape(1, 2 * wins[0] - 1, 2 * wins[1] - 1, 2)
                sd[f"{p}.attn.relative_coords_table"] = coords
                sd[f"{p}.attn.relative_position_index"] = offset_index(wins)
                if j % 2 and any(shifts):
                    sd[f"{p}.attn_mask"] = shift_mask(side, wins, shifts)
        if s < len(dims) - 1:
            if style == "microsoft":
                _linear(sd, fill, f"layers.{s}.downsample.reduction", dims[s + 1], 4 * dim, bias=False)
                _norm(sd, fill, f"layers.{s}.downsample.norm", dims[s + 1])
            side = (side[0] // 2, side[1] // 2)
    _norm(sd, fill, "norm", dims[-1])
    _linear(sd, fill, "head.fc" if style == "timm" else "head", classes, dims[-1])
    return sd


def _windows(x: torch.Tensor, wins: tuple[int, int]) -> torch.Tensor:
    b, h, w, c = x.shape
    wh, ww = wins
    return x.view(b, h // wh, wh, w // ww, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, wh * ww, c)


def _unwindows(x: torch.Tensor, wins: tuple[int, int], h: int, w: int) -> torch.Tensor:
    wh, ww = wins
    b = x.shape[0] // ((h // wh) * (w // ww))
    return x.view(b, h // wh, w // ww, wh, ww, -1).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, -1)


def shift_mask(side: tuple[int, int], wins: tuple[int, int], shifts: tuple[int, int]) -> torch.Tensor:
    """The release's mask of shifted windows: -100 between tokens of different regions."""
    img = torch.zeros(1, *side, 1)
    cnt = 0
    for hs in (slice(0, -wins[0]), slice(-wins[0], -shifts[0] or None), slice(-shifts[0] or side[0], None)):
        for wsl in (slice(0, -wins[1]), slice(-wins[1], -shifts[1] or None), slice(-shifts[1] or side[1], None)):
            img[:, hs, wsl, :] = cnt
            cnt += 1
    mw = _windows(img, wins).squeeze(-1)
    mask = mw[:, None, :] - mw[:, :, None]
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0).double()


def _attention(x, sd, p, heads, wins, mask, pretrained):
    bw, n, c = x.shape
    bias = torch.cat([sd[f"{p}.attn.q_bias"], torch.zeros_like(sd[f"{p}.attn.q_bias"]), sd[f"{p}.attn.v_bias"]])
    qkv = F.linear(x, sd[f"{p}.attn.qkv.weight"], bias).reshape(bw, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(sd[f"{p}.attn.logit_scale"], max=LOG_SCALE_MAX).exp()
    attn = attn + cpb_bias(sd, f"{p}.attn.cpb_mlp", wins, pretrained).unsqueeze(0)
    out = with_window_mask(attn, mask).softmax(-1) @ v
    return linear(out.transpose(1, 2).reshape(bw, n, c), sd, f"{p}.attn.proj")


def _merge(x: torch.Tensor, sd: dict, p: str, h: int, w: int) -> tuple[torch.Tensor, int, int]:
    b, _, c = x.shape
    x = x.view(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 4, 2, 5).reshape(b, -1, 4 * c)
    return ln(linear(x, sd, f"{p}.reduction"), sd, f"{p}.norm", 1e-5), h // 2, w // 2


def swinv2_forward(
    sd: dict,
    x: torch.Tensor,
    depths: tuple[int, ...],
    heads: tuple[int, ...],
    window: int,
    style: str = "microsoft",
    pretrained: int | None = None,
) -> torch.Tensor:
    """SwinTransformerV2.forward: x + norm1(attn(x)), x + norm2(mlp(x)); merging reduces, then normalises."""
    b = x.shape[0]
    x, h, wd = swin_stem(sd, x)
    for s, depth in enumerate(depths):
        if style == "timm" and s > 0:
            x, h, wd = _merge(x, sd, f"layers.{s}.downsample", h, wd)
        wins, shifts = _stage_window((h, wd), window)
        for j in range(depth):
            p = f"layers.{s}.blocks.{j}"
            shift = shifts if j % 2 else (0, 0)
            y = x.view(b, h, wd, -1)
            if any(shift):
                y = torch.roll(y, shifts=(-shift[0], -shift[1]), dims=(1, 2))
            mask = shift_mask((h, wd), wins, shift) if any(shift) else None
            y = _unwindows(_attention(_windows(y, wins), sd, p, heads[s], wins, mask, pretrained), wins, h, wd)
            if any(shift):
                y = torch.roll(y, shifts=shift, dims=(1, 2))
            x = x + ln(y.reshape(b, h * wd, -1), sd, f"{p}.norm1", 1e-5)
            x = x + ln(mlp(x, sd, p), sd, f"{p}.norm2", 1e-5)
        if style == "microsoft" and s < len(depths) - 1:
            x, h, wd = _merge(x, sd, f"layers.{s}.downsample", h, wd)
    x = ln(x, sd, "norm", 1e-5).mean(1)
    return linear(x, sd, "head.fc" if style == "timm" else "head")
