"""The one host shape: a pyramid of stages, each a downsampling step then a :class:`Stage`.

The plain ViT is a pyramid of one stage (its patch embedding, no downsampling after it); PVT
and Swin have four. Slot construction (per stage), prefix tokens, the final norm, the head,
weight-decay exemptions and the feature and token outputs live here once; a host says only
how each stage downsamples and, where it differs from plain attention, what its attention is.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ..config import HostConfig
from ..encodings.relative.base import RelativePosition
from ..errors import VitposError
from ..grid import Grid, tokens_to_map
from ..padding import Padding
from .layers import Attention, Block, ImageStem, PatchEmbed, init_linear
from .seq_pool import SequencePool
from .stage import Stage

__all__ = ["PyramidTransformer", "NormedPatchEmbed"]

POSITION_SLOTS = (".absolute.", ".join.", ".conditional.", ".relative.")
"""Parameter names holding one of these parts belong to a position slot (relative: ``blocks.N.attn.relative``)."""


class NormedPatchEmbed(PatchEmbed):
    """Strided k x k convolution, then LayerNorm over channels (PVT's patch embedding, Swin's stem)."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__(patch_size, in_chans, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        tokens, grid = super().forward(x)
        return self.norm(tokens), grid


def pixel_padding(padding_mask: torch.Tensor, images: torch.Tensor) -> Padding:
    """The :class:`~vitpos.padding.Padding` of a pixel mask (B, H, W) that matches ``images`` (B, C, H, W)."""
    if isinstance(padding_mask, torch.Tensor) and tuple(padding_mask.shape[-2:]) != tuple(images.shape[-2:]):
        raise VitposError(
            f"padding_mask is {tuple(padding_mask.shape)}, the images {tuple(images.shape)}; pass one (B, H, W) "
            "bool mask of the images' size, True where a pixel is padding"
        )
    return Padding.from_mask(padding_mask.to(images.device), images.shape[0])


class PyramidTransformer(nn.Module):
    """Base of every host: S stages, each a downsampling step (``downsamples[s]``) then a :class:`Stage`.

    Subclasses say how a stage downsamples (:meth:`make_downsample`; stage 0's is the patch
    embedding of the image), which attention its blocks use (:meth:`make_attention`, default:
    plain global attention); the stages' sizes, and the grid relative encodings live on, are the
    config's stage geometry (:attr:`~vitpos.config.HostConfig.stages`).
    The class token and register tokens join the stages that have prefix tokens (the last one).

    ``forward_features`` returns every stage's feature map (B, C_s, H_s, W_s), the last one after
    the final LayerNorm, for dense heads (for the ViT: a list with one map of its patch tokens);
    ``forward_tokens`` the last stage's normalised tokens (B, P + H*W, C), prefix tokens first,
    which is what timm's ViT ``forward_features`` returns; ``forward`` pools them (class token
    or mean of the patch tokens) and classifies. Any input whose sides are multiples of
    ``cfg.stride`` works.

    Every forward takes an optional ``padding_mask`` (B, H, W), True where a pixel is padding
    (DETR's mask; images at the top left, padded at the bottom and right to a multiple of
    ``cfg.stride``): each stage derives its token padding from it (:mod:`vitpos.padding`) and
    every slot treats each image as if it ran alone, so the outputs on its valid cells are that
    image's own. Padded cells of the feature maps are zero; a mean-pooling head averages the
    valid tokens. None (the default) runs as before, at no cost.
    """

    config_class: type[HostConfig]
    """The config this host is built from (read by :func:`~vitpos.models.factory.config_from_dict`)."""
    norm_eps = 1e-6
    """LayerNorm epsilon of the blocks and the final norm (ViT's and PVT's; Swin uses PyTorch's default 1e-5)."""
    takes_padding = True
    """Whether padded batches (``padding_mask``) give each image's own outputs; a stem that mixes
    pixels across patches (convolutions, soft splits) does not."""
    block_class: type[Block] = Block
    """The encoder block (the pre-norm ViT block; Compact Transformers' layer for that host)."""

    def __init__(self, cfg: HostConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        self.embed_dims = cfg.embed_dims
        self.num_features = cfg.embed_dims[-1]
        self.num_prefix_tokens = cfg.num_prefix_tokens
        self.downsamples = nn.ModuleList(self.make_downsample(s) for s in range(cfg.num_stages))
        distill = cfg.distillation_tokens
        registers = cfg.num_prefix_tokens - int(bool(cfg.class_token)) - distill
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.num_features)) if cfg.class_token else None
        self.dist_token = nn.Parameter(torch.zeros(1, distill, self.num_features)) if distill else None
        self.reg_token = nn.Parameter(torch.zeros(1, registers, self.num_features)) if registers else None
        for token in self.prefix_parameters():
            nn.init.trunc_normal_(token, std=0.02)

        depths = [geometry.context.depth for geometry in cfg.stages]
        # stochastic depth rises linearly over all blocks of all stages, as in PVT and Swin
        rates = [cfg.drop_path_rate * i / max(sum(depths) - 1, 1) for i in range(sum(depths))]
        self.drop_path_rates = [rates[sum(depths[:s]) : sum(depths[: s + 1])] for s in range(cfg.num_stages)]
        self.stages = nn.ModuleList(
            Stage(s, cfg.position, g.context, g.relative_context, functools.partial(self.make_block, s), cfg.drop_rate)
            for s, g in enumerate(cfg.stages)
        )
        self.norm = nn.LayerNorm(self.num_features, eps=self.norm_eps)
        self.attention_pool = SequencePool(self.num_features) if cfg.head == "seq" else None
        self.head_drop = nn.Dropout(cfg.drop_rate)
        self.head = init_linear(nn.Linear(self.num_features, cfg.num_classes)) if cfg.num_classes else nn.Identity()
        self.head_dist = (
            (init_linear(nn.Linear(self.num_features, cfg.num_classes)) if cfg.num_classes else nn.Identity())
            if distill
            else None
        )

    def make_downsample(self, stage: int) -> nn.Module:
        """The module that maps the previous map (the image for stage 0) to this stage's tokens and grid."""
        raise NotImplementedError

    def make_attention(self, stage: int, index: int, relative: RelativePosition | None) -> Attention | None:
        """The attention of block ``index`` of ``stage`` around its relative encoding; None: plain attention."""
        return None

    def make_block(self, stage: int, index: int, relative: RelativePosition | None) -> Block:
        """Block ``index`` of ``stage``: pre-norm attention (:meth:`make_attention`) and MLP."""
        cfg = self.cfg
        geometry = cfg.stages[stage]
        dim, heads = geometry.context.embed_dim, geometry.context.num_heads
        attn = self.make_attention(stage, index, relative)
        return self.block_class(
            dim, heads, geometry.mlp_ratio, cfg.qkv_bias, cfg.drop_rate, cfg.attn_drop_rate,
            self.drop_path_rates[stage][index], relative=None if attn is not None else relative, attn=attn,
            norm_eps=self.norm_eps, layer_scale=cfg.layer_scale,
        )  # fmt: skip

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        """The token grid of every stage for an image of size ``image_hw``; raises if it does not fit."""
        return self.cfg.stage_grids(image_hw)

    def prefix_parameters(self) -> list[nn.Parameter]:
        """The learned prefix tokens in their order: class, distillation, registers (those the host has)."""
        return [t for t in (self.cls_token, self.dist_token, self.reg_token) if t is not None]

    def check_padding(self, padding_mask: torch.Tensor | None) -> None:
        """Raise :class:`VitposError` for a padding mask this host cannot honour (:attr:`takes_padding`)."""
        if padding_mask is not None and not self.takes_padding:
            raise VitposError(
                f"{type(self).__name__} ({self.cfg.arch}) cannot take a padding_mask: its stem mixes pixels across "
                "patches, so padding would change the valid tokens; run each image alone or unpadded"
            )

    def _prepend_prefix(self, x: torch.Tensor) -> torch.Tensor:
        prefix = [t.expand(x.shape[0], -1, -1) for t in self.prefix_parameters()]
        return torch.cat([*prefix, x], dim=1) if prefix else x

    def forward_stages(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None = None
    ) -> tuple[list[torch.Tensor], torch.Tensor, Grid, Padding | None]:
        """Images -> (the maps (B, C, H, W) of every stage but the last, the last stage's
        normalised tokens (B, P + H*W, C), its grid, its padding or None)."""
        stem = self.downsamples[0]
        assert isinstance(stem, ImageStem)  # make_downsample(0) is the image's stem
        stem.check_input(x)
        self.stage_grids((x.shape[-2], x.shape[-1]))  # raises for sizes the stages cannot divide
        self.check_padding(padding_mask)
        padding = None if padding_mask is None else pixel_padding(padding_mask, x).or_none()
        maps: list[torch.Tensor] = []
        feature, last = x, len(self.stages) - 1
        for s, (down, stage) in enumerate(zip(self.downsamples, self.stages, strict=True)):
            tokens, grid = down(feature)
            assert isinstance(stage, Stage)
            prefix = stage.num_prefix_tokens
            tokens = self._prepend_prefix(tokens) if prefix else tokens
            if padding is None:
                tokens = stage(tokens, grid, prefix)
            else:
                padding = padding.at(grid)
                tokens = padding.zero(stage(tokens, grid, prefix, padding), prefix)
            if s < last:
                feature = tokens_to_map(tokens[:, prefix:], grid)
                maps.append(feature)
        tokens = self.norm(tokens)
        return maps, tokens if padding is None else padding.zero(tokens, self.num_prefix_tokens), grid, padding

    def forward_features(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Images (B, C, H, W) -> one feature map (B, C_s, H_s, W_s) per stage (the last one normalised)."""
        maps, tokens, grid, _ = self.forward_stages(x, padding_mask)
        return [*maps, tokens_to_map(tokens[:, self.num_prefix_tokens :], grid)]

    def forward_tokens(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Images (B, C, H, W) -> the last stage's normalised tokens (B, P + H*W, C), prefix tokens first."""
        return self.forward_stages(x, padding_mask)[1]

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False, padding: Padding | None = None) -> torch.Tensor:
        """Pool the last stage's tokens (class token, mean or sequence pooling of the patch tokens; of the
        valid ones with the last stage's ``padding``) and classify; with a distillation token, the mean
        of the two heads' logits (DeiT's inference)."""
        if self.head_dist is not None:
            if pre_logits:
                return self.head_drop((x[:, 0] + x[:, 1]) / 2)
            logits, dist_logits = self.distilled_logits(x)
            return (logits + dist_logits) / 2
        if self.cfg.head == "cls":
            x = x[:, 0]
        elif self.attention_pool is not None:
            x = self.attention_pool(x[:, self.num_prefix_tokens :], None if padding is None else padding.tokens())
        elif padding is None:
            x = x[:, self.num_prefix_tokens :].mean(dim=1)
        else:  # padded tokens are zero
            x = x[:, self.num_prefix_tokens :].sum(dim=1) / padding.valid.prod(dim=1, keepdim=True).to(x.dtype)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        if padding_mask is None:
            return self.forward_head(self.forward_tokens(x))
        _, tokens, _, padding = self.forward_stages(x, padding_mask)
        return self.forward_head(tokens, padding=padding)

    def distilled_logits(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The class head's logits from the class token and the distillation head's from its token (DeiT)."""
        if self.head_dist is None:
            raise VitposError(
                f"{type(self).__name__} has no distillation token; build it with distilled=True "
                "(the deit_*_distilled_* presets)"
            )
        return self.head(self.head_drop(tokens[:, 0])), self.head_dist(self.head_drop(tokens[:, 1]))

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the four position slots of every stage, by name."""
        return {n: p for n, p in self.named_parameters() if any(part in n for part in POSITION_SLOTS)}

    def no_weight_decay(self) -> set[str]:
        """Parameter names exempt from weight decay: the prefix tokens and every position parameter."""
        prefix = {n for n, _ in self.named_parameters() if n in ("cls_token", "dist_token", "reg_token")}
        return prefix | set(self.position_parameters())
