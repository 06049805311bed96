"""DeiT III and RoPE-ViT checkpoints (facebookresearch/deit's ``models_v2.py``; naver-ai/rope-vit's
``deit/models_v2_rope.py``): timm's ViT keys with LayerScale, a table without a class-token row, rotations.

Their blocks hold ``gamma_1`` and ``gamma_2`` (LayerScale, :class:`~vitpos.models.layers.LayerScale`):
they become ``stages.0.blocks.N.ls1.gamma`` and ``ls2.gamma``. ``pos_embed`` is (1, H*W, D), the grid
only (the class token gets no position): it becomes the table of ``learned:noprefix``. RoPE-Mixed
files hold ``freqs`` (2, depth, heads * head_dim / 2), every layer's per-head (x, y) frequencies:
layer i becomes ``stages.0.blocks.i.attn.relative.mixed_freqs`` (2, heads, head_dim / 2), and the
``freqs_t_x`` / ``freqs_t_y`` buffers (the trained grid's coordinates, which their forward
recomputes at other sizes) give the trained grid and are checked, not loaded. RoPE-Axial's
rotation has no stored values; without a table such a file shows no size, and a guessed model
keeps its preset's 224 px (the model is the same at every size). Loading selects LayerScale and
``learned:noprefix`` where the file has them; the rotation is the model's (the ``rope_*`` presets
name it). Tables are resampled as the released forward does at other sizes: bicubically without
antialias (``resize="model"``).

A DeiT III file and a RoPE-Axial file with a table (``rope_axial_ape_*``) have the same keys and
shapes; the file's stored training arguments (``args.model``) tell them apart, else the model
must be named.

Their Swin models (``SwinTransformer/models/swin_transformer_rope.py``) are Microsoft's Swin without
the bias tables, with ``layers.S.blocks.M.attn.rope_freqs`` (2, heads, head_dim / 2) and the window's
coordinates ``rope_t_x`` / ``rope_t_y`` (checked, not loaded). Both kinds store their frequencies:
RoPE-Axial's (θ 50) as a buffer whose y pairs also turn by x · cos(π/2), which float32 makes
-4.4e-8 rather than 0, so loading selects ``rope2d:mixed`` to take the stored values exactly.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..config import HostConfig
from ..errors import CheckpointError
from ..spec import SlotSpec
from .layout import HEAD_WIDTH, HEAD_WIDTH_NOTE, Layout, Target, shapes_of, square_side
from .swin import MicrosoftSwin
from .vit import STAGE, convert_vit, fit_position_table, with_layer_scale, without_prefix_row

__all__ = ["DeiT3Layout", "RopeSwin"]

GAMMA = re.compile(r"blocks\.(\d+)\.gamma_([12])")
DEIT3_NAME = re.compile(r"deit_(small|base|large)_patch16_LS")
COORDS = ("freqs_t_x", "freqs_t_y")
"""RoPE-Mixed's buffers of the trained grid's coordinates."""


def _trained_side(state: dict[str, torch.Tensor]) -> int | None:
    """The side of the square grid a RoPE-Mixed file's coordinate buffers describe, or None without them."""
    if COORDS[0] not in state:
        return None
    return square_side(state[COORDS[0]].numel())


def _grid_coordinates(side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The column and row of every cell of a ``side`` x ``side`` grid, row-major, in float64."""
    cells = torch.arange(side * side, dtype=torch.float64)
    return cells % side, torch.div(cells, side, rounding_mode="floor")


def _check_coordinates(state: dict[str, torch.Tensor], source: object, keys: tuple[str, str] = COORDS) -> None:
    """Pop the coordinate buffers; raise unless they are the column and row of every cell of a square grid."""
    t_x, t_y = (state.pop(key, None) for key in keys)
    if t_x is None and t_y is None:
        return
    side = square_side(t_x.numel()) if t_x is not None else None
    expected = _grid_coordinates(side) if side else None
    if (
        t_x is None
        or t_y is None
        or expected is None
        or t_x.shape != expected[0].shape
        or t_y.shape != expected[1].shape
        or not torch.equal(t_x.double(), expected[0])
        or not torch.equal(t_y.double(), expected[1])
    ):
        raise CheckpointError(
            f"checkpoint {source}: {', '.join(keys)} are not the column and row of every cell of a square grid, "
            "which the released RoPE-Mixed models store; the file is damaged or from another code"
        )


class DeiT3Layout(Layout):
    """DeiT III's ViTs and the RoPE-ViT models built on them."""

    name = "deit3"
    description = "DeiT III and RoPE-ViT (naver-ai/rope-vit): blocks.N.gamma_1, pos_embed (1, H*W, D), freqs"
    archs = ("vit",)
    width_key = ("patch_embed.proj.weight", 0)
    resize = "model"
    presets = ("deit3_*", "rope_*")
    assumed = (("num_heads", HEAD_WIDTH_NOTE),)
    ambiguity = (
        "A DeiT III file and a RoPE-Axial file with a table (rope_axial_ape_*) have the same keys and shapes; "
        "only a file whose stored training arguments name its model tells them apart"
    )

    def matches(self, keys: set[str]) -> bool:
        return "blocks.0.gamma_1" in keys and "patch_embed.proj.weight" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for key in [k for k in state if GAMMA.fullmatch(k)]:
            match = GAMMA.fullmatch(key)
            assert match is not None
            out[f"{STAGE}blocks.{match[1]}.ls{match[2]}.gamma"] = state.pop(key)
        _check_coordinates(state, target.source)
        if "freqs" in state:
            out.update(self._frequencies(state.pop("freqs"), target))
        fit_position_table(state, out, target, "pos_embed", STAGE + "absolute", 0)
        return {**out, **convert_vit(state, target)}

    @staticmethod
    def _frequencies(freqs: torch.Tensor, target: Target) -> dict[str, torch.Tensor]:
        """Layer i's (2, heads * d/2) frequencies as the model's (2, heads, d/2) ``mixed_freqs`` of block i."""
        own = target.model.state_dict()
        out = {}
        for i in range(freqs.shape[1] if freqs.dim() == 3 else 0):
            key = f"{STAGE}blocks.{i}.attn.relative.mixed_freqs"
            layer = freqs[:, i]
            shape = own[key].shape if key in own else None
            out[key] = layer.reshape(shape) if shape is not None and layer.numel() == own[key].numel() else layer
        if not out:
            out["freqs"] = freqs  # not (2, depth, C): reported as a key with no place
        return out

    def released_config(self, cfg: HostConfig) -> HostConfig:
        """LayerScale, which every file of this layout has."""
        return with_layer_scale(cfg)

    def file_config(self, cfg: HostConfig, state: dict[str, torch.Tensor]) -> HostConfig:
        """A learned table without the class-token row, where the file has ``pos_embed``."""
        return without_prefix_row(cfg) if "pos_embed" in state else cfg

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """img_size of the grid ``pos_embed`` or RoPE-Mixed's coordinates were stored for."""
        side = square_side(state["pos_embed"].shape[-2]) if "pos_embed" in state else _trained_side(state)
        return {} if side is None else {"img_size": side * cfg.patch_size}

    def stored_shapes(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Width, depth, MLP ratio and patch size read from the shapes; the head count assumed."""
        stem, fc1 = state.get("patch_embed.proj.weight"), state.get("blocks.0.mlp.fc1.weight")
        if stem is None or fc1 is None:
            return {}
        dim = stem.shape[0]
        return {
            "embed_dim": dim,
            "num_heads": max(1, dim // HEAD_WIDTH),
            "depth": 1 + max(int(m[1]) for k in state if (m := GAMMA.fullmatch(k)) is not None),
            "mlp_ratio": fc1.shape[0] / dim,
            "patch_size": stem.shape[-1],
        }

    def shape_summary(self, state: dict[str, torch.Tensor]) -> str:
        return shapes_of(state, ["patch_embed.proj.weight", "blocks.0.mlp.fc1.weight", "pos_embed", "freqs"])

    def trained_preset(self, args: dict[str, Any], state: dict[str, torch.Tensor]) -> str | None:
        """Their ``--model``: RoPE-ViT's names are the presets'; DeiT III's ``deit_SIZE_patch16_LS`` is deit3's."""
        model = args.get("model")
        if not isinstance(model, str):
            return None
        deit3 = DEIT3_NAME.fullmatch(model)
        return f"deit3_{deit3[1]}_patch16_224" if deit3 else model


SWIN_FREQS = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.attn\.rope_freqs")
SWIN_AXIAL_THETA = 50.0


def _axial_frequencies(head_dim: int, heads: int) -> torch.Tensor:
    """Their Swin RoPE-Axial's stored (fx, fy) of every head, computed as their code does in float32."""
    magnitudes = 1 / (SWIN_AXIAL_THETA ** (torch.arange(0, head_dim, 4)[: head_dim // 4].float() / head_dim))
    angle = torch.zeros(1)
    fx = torch.cat([magnitudes * torch.cos(angle), magnitudes * torch.cos(torch.pi / 2 + angle)])
    fy = torch.cat([magnitudes * torch.sin(angle), magnitudes * torch.sin(torch.pi / 2 + angle)])
    return torch.stack([fx.expand(heads, -1), fy.expand(heads, -1)])


class RopeSwin(MicrosoftSwin):
    """RoPE-ViT's Swin models: Microsoft's layout with rotations in the windows instead of bias tables."""

    name = "rope-swin"
    description = "RoPE-ViT's Swin: layers.S.blocks.M.attn.rope_freqs, no bias tables"
    presets = ("swin_rope_*",)

    def matches(self, keys: set[str]) -> bool:
        return "layers.0.blocks.0.attn.rope_freqs" in keys

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for key in [k for k in state if SWIN_FREQS.fullmatch(k)]:
            match = SWIN_FREQS.fullmatch(key)
            assert match is not None
            out[f"stages.{match[1]}.blocks.{match[2]}.attn.relative.mixed_freqs"] = state.pop(key)
            prefix = key[: -len("rope_freqs")]
            _check_coordinates(state, target.source, (f"{prefix}rope_t_x", f"{prefix}rope_t_y"))
        return {**out, **super().convert(state, target)}

    def file_config(self, cfg: HostConfig, state: dict[str, torch.Tensor]) -> HostConfig:
        """``rope2d:mixed`` for a ``rope2d`` model: the file's frequencies, RoPE-Axial's included, are its own."""
        relative = SlotSpec.parse(cfg.position.relative)
        if relative.name != "rope2d" or "mixed" in relative.flags:
            return cfg
        return cfg.replace(relative=str(SlotSpec("rope2d", None, ("mixed",), relative.options)))

    def trained_preset(self, args: dict[str, Any], state: dict[str, torch.Tensor]) -> str | None:
        """RoPE-Axial where every block's frequencies are the axial ones at theta 50 (a buffer, never trained),
        else RoPE-Mixed; Swin-T or Swin-S by the third stage's depth."""
        freqs = [v for k, v in state.items() if SWIN_FREQS.fullmatch(k)]
        if not freqs or any(f.is_meta or f.dim() != 3 for f in freqs):
            return None
        kind = (
            "axial"
            if all(torch.equal(f.float(), _axial_frequencies(f.shape[-1] * 2, f.shape[1])) for f in freqs)
            else "mixed"
        )
        size = "small" if any(k.startswith("layers.2.blocks.6.") for k in state) else "tiny"
        return f"swin_rope_{kind}_{size}_patch4_window7_224"

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        """The window the coordinates of the first block cover."""
        coords = state.get("layers.0.blocks.0.attn.rope_t_x")
        side = None if coords is None else square_side(coords.numel())
        return {} if side is None else {"window_size": side}
