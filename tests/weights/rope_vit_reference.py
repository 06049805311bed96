"""RoPE-ViT's DeiT models (naver-ai/rope-vit, ``deit/models_v2_rope.py``): their files' keys and shapes, and
their forward pass written out from their code's maths in float64 (eval mode). Nothing here imports vitpos."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import layouts
from .layouts import Filler, _linear, _norm, vit_blocks
from .reference import linear, ln, mlp, swin

AXIAL_THETA = 100.0


def rope_vit_file(
    fill: Filler, dim: int, depth: int, heads: int, grid: int, classes: int, mixed: bool, ape: bool, patch: int = 16
) -> dict:
    """The state dict of ``rope_vit_models``: DeiT III's blocks (``gamma_1``, ``gamma_2``), ``pos_embed`` (1, N, D)
    with ``use_ape``, RoPE-Mixed's ``freqs`` (2, depth, dim / 2) and its grid's ``freqs_t_x`` / ``freqs_t_y``."""
    sd = {"cls_token": fill(1, 1, dim)}
    if ape:
        sd["pos_embed"] = fill(1, grid * grid, dim)
    sd["patch_embed.proj.weight"] = fill(dim, 3, patch, patch)
    sd["patch_embed.proj.bias"] = fill(dim, scale=0.05)
    vit_blocks(sd, fill, dim, depth, 4 * dim)
    for i in range(depth):
        sd[f"blocks.{i}.gamma_1"] = fill(dim, scale=0.3, offset=0.5)
        sd[f"blocks.{i}.gamma_2"] = fill(dim, scale=0.3, offset=0.5)
    if mixed:
        sd["freqs"] = fill(2, depth, dim // 2, scale=0.5)
        cells = torch.arange(grid * grid, dtype=torch.float32)
        sd["freqs_t_x"], sd["freqs_t_y"] = cells % grid, torch.div(cells, grid, rounding_mode="floor")
    _norm(sd, fill, "norm", dim)
    _linear(sd, fill, "head", classes, dim)
    return sd


def _coordinates(columns: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """init_t_xy: the column and row of every cell, row-major."""
    t = torch.arange(columns * rows, dtype=torch.float64)
    return t % columns, torch.div(t, columns, rounding_mode="floor")


def _rotations(sd: dict, heads: int, depth: int, columns: int, rows: int, mixed: bool | None) -> list[torch.Tensor]:
    """Each block's freqs_cis: compute_mixed_cis (depth, heads, N, d/2), compute_axial_cis (N, d/2), or none."""
    t_x, t_y = _coordinates(columns, rows)
    if mixed is None:  # DeiT III: no rotation
        dim = sd["cls_token"].shape[-1] // heads
        return [torch.ones(columns * rows, dim // 2, dtype=torch.complex128)] * depth
    if mixed:
        freqs = sd["freqs"]
        angles_x = (t_x[:, None] @ freqs[0][:, None, :]).view(depth, -1, heads, freqs.shape[-1] // heads)
        angles_y = (t_y[:, None] @ freqs[1][:, None, :]).view(depth, -1, heads, freqs.shape[-1] // heads)
        angles = (angles_x + angles_y).permute(0, 2, 1, 3)
        return list(torch.polar(torch.ones_like(angles), angles).unbind(0))
    dim = sd["cls_token"].shape[-1] // heads
    magnitudes = 1.0 / (AXIAL_THETA ** (torch.arange(0, dim, 4, dtype=torch.float64)[: dim // 4] / dim))
    fx, fy = torch.outer(t_x, magnitudes), torch.outer(t_y, magnitudes)
    cis = torch.cat([torch.polar(torch.ones_like(fx), fx), torch.polar(torch.ones_like(fy), fy)], dim=-1)
    return [cis] * depth


def _rotate(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    """apply_rotary_emb on adjacent channel pairs (B, heads, N, d)."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * cis).flatten(3)


def _attention(x: torch.Tensor, sd: dict, p: str, heads: int, cis: torch.Tensor) -> torch.Tensor:
    """RoPEAttention.forward: the class token is not rotated."""
    b, n, c = x.shape
    q, k, v = linear(x, sd, f"{p}.attn.qkv").reshape(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q = torch.cat([q[:, :, :1], _rotate(q[:, :, 1:], cis)], dim=2)
    k = torch.cat([k[:, :, :1], _rotate(k[:, :, 1:], cis)], dim=2)
    attn = ((q * (c // heads) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    return linear((attn @ v).transpose(1, 2).reshape(b, n, c), sd, f"{p}.attn.proj")


def rope_vit(sd: dict, x: torch.Tensor, heads: int, mixed: bool | None, trained_grid: int) -> torch.Tensor:
    """rope_vit_models.forward at any input size: pos_embed resampled by plain bicubic when the grid differs;
    ``mixed=None``: DeiT III's vit_models (the same without rotations)."""
    w = sd["patch_embed.proj.weight"]
    patch = w.shape[-1]
    rows, columns = x.shape[-2] // patch, x.shape[-1] // patch
    x = F.conv2d(x, w, sd["patch_embed.proj.bias"], stride=patch).flatten(2).transpose(1, 2)
    if "pos_embed" in sd:
        pos = sd["pos_embed"]
        if pos.shape[-2] != x.shape[-2]:
            maps = pos.view(1, trained_grid, trained_grid, -1).permute(0, 3, 1, 2)
            maps = F.interpolate(maps, size=(rows, columns), mode="bicubic", align_corners=False)
            pos = maps.permute(0, 2, 3, 1).flatten(1, 2)
        x = x + pos
    x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1)
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    for i, cis in enumerate(_rotations(sd, heads, depth, columns, rows, mixed)):
        p = f"blocks.{i}"
        x = x + sd[f"{p}.gamma_1"] * _attention(ln(x, sd, f"{p}.norm1", 1e-6), sd, p, heads, cis)
        x = x + sd[f"{p}.gamma_2"] * mlp(ln(x, sd, f"{p}.norm2", 1e-6), sd, p)
    return linear(ln(x, sd, "norm", 1e-6)[:, 0], sd, "head")


def _axial_swin_freqs(head_dim: int, heads: int, theta: float = 50.0) -> torch.Tensor:
    """init_random_2d_freqs(rotate=False) in float32, as their Swin RoPE-Axial stores it: cos(pi/2) is -4.4e-8."""
    magnitudes = 1 / (theta ** (torch.arange(0, head_dim, 4)[: head_dim // 4].float() / head_dim))
    angle = torch.zeros(1)
    fx = torch.cat([magnitudes * torch.cos(angle), magnitudes * torch.cos(torch.pi / 2 + angle)])
    fy = torch.cat([magnitudes * torch.sin(angle), magnitudes * torch.sin(torch.pi / 2 + angle)])
    return torch.stack([fx.expand(heads, -1), fy.expand(heads, -1)])


def rope_swin_file(
    fill: Filler, dims: tuple[int, ...], depths: tuple[int, ...], heads: tuple[int, ...], mixed: bool, img: int = 56
) -> dict:
    """RoPE-ViT's Swin (window 7, patch 4, 7 classes): Microsoft's keys without the bias tables and index, with
    each block's ``rope_freqs`` (2, heads, d/2; real values even in a meta file) and its window's ``rope_t_x`` /
    ``rope_t_y``."""
    sd = layouts.swin(fill, dims, depths, heads, window=7, patch=4, img=img, classes=7)
    gen = torch.Generator().manual_seed(len(dims))
    cells = torch.arange(49, dtype=torch.float32)
    for key in [k for k in sd if k.endswith(("relative_position_bias_table", "relative_position_index"))]:
        del sd[key]
    for s, (dim, h) in enumerate(zip(dims, heads, strict=True)):
        for j in range(depths[s]):
            p = f"layers.{s}.blocks.{j}.attn"
            mixed_freqs = torch.randn(2, h, dim // h // 2, generator=gen, dtype=torch.float64) * 0.5
            sd[f"{p}.rope_freqs"] = mixed_freqs if mixed else _axial_swin_freqs(dim // h, h).double()
            sd[f"{p}.rope_t_x"], sd[f"{p}.rope_t_y"] = cells % 7, torch.div(cells, 7, rounding_mode="floor")
    return sd


def _rope_window_attention(x: torch.Tensor, sd: dict, p: str, heads: int, ws: int, mask: torch.Tensor | None):
    """RoPEWindowAttention.forward (no bias table): queries and keys turned by the window's coordinates."""
    bw, n, c = x.shape
    q, k, v = linear(x, sd, f"{p}.attn.qkv").reshape(bw, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    t_x, t_y = _coordinates(ws, ws)
    freqs = sd[f"{p}.attn.rope_freqs"]
    angles = t_x[:, None] @ freqs[0][:, None, :] + t_y[:, None] @ freqs[1][:, None, :]  # heads, N, d/2
    cis = torch.polar(torch.ones_like(angles), angles)
    attn = _rotate(q * (c // heads) ** -0.5, cis) @ _rotate(k, cis).transpose(-2, -1)
    if mask is not None:
        nw = mask.shape[0]
        attn = (attn.view(bw // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)).view(-1, heads, n, n)
    return linear((attn.softmax(-1) @ v).transpose(1, 2).reshape(bw, n, c), sd, f"{p}.attn.proj")


def rope_swin(sd: dict, x: torch.Tensor, depths: tuple[int, ...], heads: tuple[int, ...]) -> torch.Tensor:
    """Their SwinTransformer forward with RoPE window attention (window 7)."""
    return swin(sd, x, depths, heads, window=7, style="microsoft", attention=_rope_window_attention)
