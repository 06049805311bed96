"""The plain Vision Transformer host (ViT, DeiT, CPVT, ViT-Lite) with the four position slots."""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..encodings.base import SlotContext
from ..grid import Grid, patch_grid
from ..registry import ARCHITECTURES
from .layers import Block, PatchEmbed, init_linear, run_blocks

__all__ = ["VisionTransformer", "slot_context"]


def slot_context(cfg: ModelConfig) -> SlotContext:
    """The facts slot modules of ``cfg`` are built from."""
    return SlotContext(cfg.embed_dim, cfg.num_heads, cfg.depth, cfg.grid, cfg.num_prefix_tokens)


@ARCHITECTURES.register("vit")
class VisionTransformer(nn.Module):
    """ViT with an absolute encoding, a join, conditional generators and relative attention terms.

    The grid (H, W) is computed from every input, so the model runs at any image size that is
    a multiple of the patch size (or any size with ``pad_to_patch``).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        self.embed_dim = self.num_features = cfg.embed_dim
        self.index = 0
        self.num_prefix_tokens = cfg.num_prefix_tokens
        self.patch_embed = PatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dim, pad=cfg.pad_to_patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.embed_dim)) if cfg.class_token else None
        self.reg_token = nn.Parameter(torch.zeros(1, cfg.reg_tokens, cfg.embed_dim)) if cfg.reg_tokens else None
        for token in (self.cls_token, self.reg_token):
            if token is not None:
                nn.init.trunc_normal_(token, std=0.02)

        pos, ctx = cfg.position, slot_context(cfg)
        self.absolute = pos.entry("absolute").from_spec(pos.spec("absolute"), ctx)
        self.join = pos.entry("join").from_spec(pos.spec("join"), ctx)
        self.join.bind_absolute(self.absolute)
        self.conditional = pos.entry("conditional").from_spec(pos.spec("conditional"), ctx)
        relative_entry, relative_spec = pos.entry("relative"), pos.spec("relative")

        self.pos_drop = nn.Dropout(cfg.drop_rate)
        rates = [cfg.drop_path_rate * i / max(cfg.depth - 1, 1) for i in range(cfg.depth)]
        self.blocks = nn.ModuleList(
            Block(
                cfg.embed_dim, cfg.num_heads, cfg.mlp_ratio, cfg.qkv_bias, cfg.drop_rate, cfg.attn_drop_rate, rate,
                relative=self.join.adapt_relative(i, relative_entry.from_spec(relative_spec, ctx, layer=i)),
            )
            for i, rate in enumerate(rates)
        )
        self.norm = nn.LayerNorm(cfg.embed_dim, eps=1e-6)
        self.head_drop = nn.Dropout(cfg.drop_rate)
        self.head = init_linear(nn.Linear(cfg.embed_dim, cfg.num_classes)) if cfg.num_classes else nn.Identity()

    @property
    def stages(self) -> nn.ModuleList:
        """The one stage (this model holds its slots and blocks itself; not registered as a submodule)."""
        stages = nn.ModuleList()
        stages._modules["0"] = self  # a view: no parameter is registered twice
        return stages

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        """The token grid of the one stage for an image of size ``image_hw``; raises if it does not fit."""
        return self.cfg.stage_grids(image_hw)

    def grid_for(self, image_hw: tuple[int, int]) -> Grid:
        """The token grid this model uses for an image of size ``image_hw``."""
        return patch_grid(image_hw, self.cfg.patch_size, pad=self.cfg.pad_to_patch)

    def position_encoding(self, grid: Grid) -> torch.Tensor | None:
        """The absolute encoding of the whole sequence at ``grid`` (1, P + H*W, D), or None."""
        return None if self.absolute is None else self.absolute.with_prefix(grid)

    def _prepend_prefix(self, x: torch.Tensor) -> torch.Tensor:
        prefix = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        return torch.cat([*prefix, x], dim=1) if prefix else x

    def forward_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> normalised tokens (B, P + H*W, D)."""
        return self.forward_features(x)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> normalised tokens (B, P + H*W, D)."""
        x, grid = self.patch_embed(x)
        x = self._prepend_prefix(x)
        pe = self.position_encoding(grid)
        x = run_blocks(x, grid, self.num_prefix_tokens, self.blocks, pe, self.join, self.conditional, self.pos_drop)
        return self.norm(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Pool (class token or mean of patch tokens) and classify."""
        x = x[:, 0] if self.cfg.head == "cls" else x[:, self.num_prefix_tokens :].mean(dim=1)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the four position slots, by name."""
        slots = ("absolute.", "join.", "conditional.")
        return {n: p for n, p in self.named_parameters() if n.startswith(slots) or ".attn.relative." in n}

    def no_weight_decay(self) -> set[str]:
        """Parameter names exempt from weight decay: prefix tokens and position parameters."""
        prefix = {n for n, _ in self.named_parameters() if n in ("cls_token", "reg_token")}
        return prefix | set(self.position_parameters())
