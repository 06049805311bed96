"""What the hierarchical hosts share: stages of shrinking grids, per-stage slots, feature maps, head."""

from __future__ import annotations

import functools

import torch
from torch import nn

from ..encodings.base import SlotContext
from ..encodings.relative.base import RelativePosition
from ..grid import Grid, tokens_to_map
from ..pyramid_config import PyramidConfig
from .layers import Block, PatchEmbed, init_linear
from .stage import Stage

__all__ = ["PyramidTransformer", "NormedPatchEmbed"]


class NormedPatchEmbed(PatchEmbed):
    """Strided k x k convolution, then LayerNorm over channels (PVT's patch embedding, Swin's stem)."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__(patch_size, in_chans, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        tokens, grid = super().forward(x)
        return self.norm(tokens), grid


class PyramidTransformer(nn.Module):
    """Base of the pyramid hosts: S stages, each a downsampling step then a :class:`Stage`.

    Subclasses say how a stage downsamples (:meth:`make_downsample`), what its blocks are
    (:meth:`make_block`) and on which grid relative encodings live (:meth:`relative_context`).
    ``forward_features`` returns every stage's feature map (B, C_s, H_s, W_s), the last one
    after the final LayerNorm; ``forward`` pools the last stage (class token or mean) and
    classifies. Any input whose sides are multiples of ``cfg.stride`` works.
    """

    config_class = PyramidConfig

    def __init__(self, cfg: PyramidConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        self.embed_dims = cfg.embed_dims
        self.num_features = cfg.embed_dims[-1]
        self.num_prefix_tokens = cfg.num_prefix_tokens
        self.downsamples = nn.ModuleList(self.make_downsample(s) for s in range(cfg.num_stages))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.num_features)) if cfg.class_token else None
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)

        total, starts = sum(cfg.depths), [sum(cfg.depths[:s]) for s in range(cfg.num_stages)]
        # stochastic depth rises linearly over all blocks of all stages, as in PVT and Swin
        rates = [cfg.drop_path_rate * i / max(total - 1, 1) for i in range(total)]
        self.drop_path_rates = [rates[start : start + depth] for start, depth in zip(starts, cfg.depths)]
        stages = []
        for s, depth in enumerate(cfg.depths):
            ctx = SlotContext(cfg.embed_dims[s], cfg.num_heads[s], depth, cfg.stage_grid(s), cfg.stage_prefix_tokens(s))
            make_block = functools.partial(self.make_block, s)
            stages.append(Stage(s, cfg.position, ctx, self.relative_context(ctx), make_block, cfg.drop_rate))
        self.stages = nn.ModuleList(stages)
        self.norm = nn.LayerNorm(self.num_features, eps=self.norm_eps)
        self.head_drop = nn.Dropout(cfg.drop_rate)
        self.head = init_linear(nn.Linear(self.num_features, cfg.num_classes)) if cfg.num_classes else nn.Identity()

    norm_eps = 1e-6
    """LayerNorm epsilon of the blocks and the final norm (PVT's; Swin uses PyTorch's default 1e-5)."""

    def make_downsample(self, stage: int) -> nn.Module:
        """The module that maps the previous map (the image for stage 0) to this stage's tokens and grid."""
        raise NotImplementedError

    def make_block(self, stage: int, index: int, relative: RelativePosition | None) -> Block:
        """Block ``index`` of ``stage`` around its relative encoding (drop path: ``drop_path_rates``)."""
        raise NotImplementedError

    def relative_context(self, ctx: SlotContext) -> SlotContext:
        """The context relative encodings of a stage are built from (default: the stage's own)."""
        return ctx

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        """The token grid of every stage for an image of size ``image_hw``; raises if it does not fit."""
        return self.cfg.stage_grids(image_hw)

    def forward_stages(self, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Images -> (every stage's map (B, C, H, W), the last stage's normalised tokens (B, P + H*W, C))."""
        if x.ndim == 4:  # other shapes get the patch embedding's message
            self.stage_grids(tuple(x.shape[-2:]))  # raises for sizes the stages cannot halve
        maps: list[torch.Tensor] = []
        last = len(self.stages) - 1
        feature = x
        for s, (down, stage) in enumerate(zip(self.downsamples, self.stages)):
            tokens, grid = down(feature)
            prefix = self.cfg.stage_prefix_tokens(s)
            if prefix:
                tokens = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
            tokens = stage(tokens, grid, prefix)
            if s == last:
                tokens = self.norm(tokens)
            feature = tokens_to_map(tokens[:, prefix:], grid)
            maps.append(feature)
        return maps, tokens

    def forward_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Images (B, C, H, W) -> one feature map (B, C_s, H_s, W_s) per stage, for dense heads."""
        return self.forward_stages(x)[0]

    def forward_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> the last stage's normalised tokens (B, P + H*W, C)."""
        return self.forward_stages(x)[1]

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Pool the last stage's tokens (class token or mean of patch tokens) and classify."""
        x = x[:, 0] if self.cfg.head == "cls" else x[:, self.num_prefix_tokens :].mean(dim=1)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_tokens(x))

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the four position slots of every stage, by name."""
        parts = (".absolute.", ".join.", ".conditional.", ".relative.")
        return {n: p for n, p in self.named_parameters() if any(part in n for part in parts)}

    def no_weight_decay(self) -> set[str]:
        """Parameter names exempt from weight decay: the class token and position parameters."""
        prefix = {n for n, _ in self.named_parameters() if n == "cls_token"}
        return prefix | set(self.position_parameters())

