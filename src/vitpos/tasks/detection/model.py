"""DETR (Carion et al., ECCV 2020) with the four position slots in its encoder (iRPE §4.4, Table 6).

A CNN stem (the backbone's role; DETR uses ResNet-50) maps the image to a grid of features, a
1x1 convolution projects them to the transformer width, and the encoder — one
:class:`~vitpos.models.stage.Stage` of blocks, built exactly as a ViT host's — takes the
absolute, join, conditional and relative slots. DETR's own choice is ``absolute='sine'`` with
``join='detr'`` (the encoding added to queries and keys of every layer); iRPE's Table 6 adds
relative encodings to every encoder self-attention. The decoder turns ``num_queries`` learned
object queries into one class (over C + 1, "no object" last) and one box (normalised cx, cy, w,
h) each, after every layer for the auxiliary losses.

Differences from DETR's code, by design: pre-norm layers with a final encoder and decoder norm
(DETR's ``--pre_norm``; its default is post-norm), GELU in the encoder's feed-forward (the
blocks every host shares; the decoder keeps DETR's ReLU), and the cross-attention keys get the
absolute encoding the encoder used (none when ``absolute='none'``).

Padded batches: every forward takes DETR's ``padding_mask`` (B, H, W), True at padded pixels
(images at the top left, padded to a multiple of the stride). The encoder's slots treat each
image as if it ran alone on its valid cells (:mod:`vitpos.padding`; the sine encoding is
normalised over the valid region, as DETR's cumulative sum of the mask does), the decoder's
cross-attention ignores padded memory, as DETR's ``memory_key_padding_mask`` does. The CNN stem's
GroupNorm pools over the whole padded map, so the stem, unlike the encoder and decoder, is not
the same for an image padded and alone; a host backbone (:class:`HostBackbone`) takes the mask too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...config import HostConfig
from ...encodings.relative.base import RelativePosition
from ...grid import Grid, tokens_to_map
from ...models.layers import Block
from ...models.stage import Stage
from ...padding import Padding
from ...registry import ARCHITECTURES
from .config import DetrConfig
from .criterion import LossWeights, SetCriterion

__all__ = ["DETR", "ConvStem", "HostBackbone", "DetrEncoder", "DetrDecoder", "DecoderLayer", "BoxHead"]


class ConvStem(nn.Module):
    """Stride-2 3x3 convolutions with GroupNorm and ReLU: (B, C, H, W) -> (B, widths[-1], H/s, W/s)."""

    def __init__(self, in_chans: int, widths: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for width in widths:
            layers += [
                nn.Conv2d(in_chans, width, 3, stride=2, padding=1, bias=False),
                nn.GroupNorm(min(8, width), width),
                nn.ReLU(inplace=True),
            ]
            in_chans = width
        self.layers = nn.Sequential(*layers)
        self.out_channels = in_chans

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class HostBackbone(nn.Module):
    """A vitpos host in the backbone's role: images -> the map of its stage ``stage`` (B, C_s, H/s, W/s).

    The host keeps its own names under ``host.`` (so a classifier's weights, in any layout
    ``create_model`` reads, load into it: :attr:`DETR.pretrained_host`)."""

    def __init__(self, cfg: HostConfig, stage: int) -> None:
        super().__init__()
        self.host = ARCHITECTURES.get(cfg.arch)(cfg)
        self.stage = stage
        self.out_channels = cfg.embed_dims[stage]

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Images and their ``padding_mask`` (B, H, W) or None -> the stage's map (the host honours the mask)."""
        return self.host.forward_features(x, padding_mask)[self.stage]


class DetrEncoder(nn.Module):
    """One stage of pre-norm blocks with the four slots, then a LayerNorm: DETR's encoder as a host stage."""

    def __init__(self, cfg: DetrConfig) -> None:
        super().__init__()
        ctx = cfg.stage_context(0)
        rates = [cfg.drop_path_rate * i / max(cfg.enc_depth - 1, 1) for i in range(cfg.enc_depth)]

        def make_block(index: int, relative: RelativePosition | None) -> Block:
            return Block(
                cfg.embed_dim,
                cfg.num_heads,
                cfg.mlp_ratio,
                cfg.qkv_bias,
                cfg.drop_rate,
                cfg.attn_drop_rate,
                rates[index],
                relative=relative,
                norm_eps=1e-5,
                layer_scale=cfg.layer_scale,
            )

        self.stages = nn.ModuleList([Stage(0, cfg.position, ctx, ctx, make_block, cfg.drop_rate)])
        self.norm = nn.LayerNorm(cfg.embed_dim)

    def forward(
        self, tokens: torch.Tensor, grid: Grid, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # B, H*W, D
        """Tokens (B, H*W, D) on ``grid`` -> memory; ``padding_mask`` (B, H', W'), True at padding, at the
        grid's or the image's resolution (a multiple of it): padded cells of the memory are zero."""
        if padding_mask is None:
            return self.norm(self.stages[0](tokens, grid, 0))
        padding = grid_padding(padding_mask, grid, tokens.shape[0])
        return padding.zero(self.norm(self.stages[0](tokens, grid, 0, padding)))


def grid_padding(padding_mask: torch.Tensor, grid: Grid, batch: int) -> Padding:
    """The :class:`~vitpos.padding.Padding` of ``grid`` from a pixel (or cell) mask (B, H', W')."""
    return Padding.from_mask(padding_mask, batch).at(grid)


def batch_first_attention(
    layer: nn.MultiheadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``layer(query, key, value, key_padding_mask=...)[0]`` for (B, L, D) inputs, computed batch-first
    from the layer's own weights; ``key_padding_mask`` (B, S) is True at keys to ignore.

    The same numbers as :class:`torch.nn.MultiheadAttention`; its forward goes through (L, B, D)
    views whose strides ``torch.export`` can only trace for a batch other than 1.
    """
    w_q, w_k, w_v = layer.in_proj_weight.chunk(3)
    b_q, b_k, b_v = layer.in_proj_bias.chunk(3) if layer.in_proj_bias is not None else (None, None, None)
    heads = layer.num_heads

    def split(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return F.linear(x, weight, bias).unflatten(-1, (heads, -1)).transpose(1, 2)  # B, heads, L, d

    out = F.scaled_dot_product_attention(
        split(query, w_q, b_q),
        split(key, w_k, b_k),
        split(value, w_v, b_v),
        attn_mask=None if key_padding_mask is None else ~key_padding_mask[:, None, None, :],
        dropout_p=layer.dropout if layer.training else 0.0,
    )
    return layer.out_proj(out.transpose(1, 2).flatten(2))


class DecoderLayer(nn.Module):
    """DETR's pre-norm decoder layer: self-attention of the queries, cross-attention to the encoder's
    output, feed-forward (ReLU). ``query_pos`` goes into queries and keys of the self-attention and
    the queries of the cross-attention; ``pos`` into its keys."""

    def __init__(self, dim: int, num_heads: int, hidden: int, drop: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = nn.MultiheadAttention(dim, num_heads, dropout=drop, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = nn.MultiheadAttention(dim, num_heads, dropout=drop, batch_first=True)
        self.norm3 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(inplace=True), nn.Dropout(drop), nn.Linear(hidden, dim)
        )
        self.drop = nn.Dropout(drop)

    def forward(
        self,
        tgt: torch.Tensor,
        query_pos: torch.Tensor,
        memory: torch.Tensor,
        pos: torch.Tensor | None,
        memory_padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``memory_padding`` (B, H*W) bool: memory cells the cross-attention ignores (padding)."""
        h = self.norm1(tgt)
        q = h + query_pos
        tgt = tgt + self.drop(batch_first_attention(self.self_attn, q, q, h))
        h = self.norm2(tgt)
        keys = memory if pos is None else memory + pos
        attended = batch_first_attention(self.cross_attn, h + query_pos, keys, memory, key_padding_mask=memory_padding)
        tgt = tgt + self.drop(attended)
        return tgt + self.drop(self.mlp(self.norm3(tgt)))


class DetrDecoder(nn.Module):
    """``num_queries`` learned query positions, decoded layer by layer from zeros (DETR)."""

    def __init__(self, cfg: DetrConfig) -> None:
        super().__init__()
        self.query_embed = nn.Embedding(cfg.num_queries, cfg.embed_dim)
        hidden = int(cfg.embed_dim * cfg.mlp_ratio)
        self.layers = nn.ModuleList(
            DecoderLayer(cfg.embed_dim, cfg.num_heads, hidden, cfg.drop_rate) for _ in range(cfg.dec_depth)
        )
        self.norm = nn.LayerNorm(cfg.embed_dim)

    def forward(
        self, memory: torch.Tensor, pos: torch.Tensor | None, memory_padding: torch.Tensor | None = None
    ) -> torch.Tensor:  # layers, B, Q, D
        """Every layer's output after the shared final norm (DETR's ``return_intermediate``);
        ``memory_padding`` (B, H*W) marks padded memory cells."""
        query_pos = self.query_embed.weight[None].expand(memory.shape[0], -1, -1).to(memory.dtype)
        tgt = torch.zeros_like(query_pos)
        outputs = []
        for layer in self.layers:
            tgt = layer(tgt, query_pos, memory, pos, memory_padding)
            outputs.append(self.norm(tgt))
        return torch.stack(outputs)


class BoxHead(nn.Module):
    """DETR's box head: a 3-layer ReLU MLP to 4 numbers, then a sigmoid (normalised cx, cy, w, h)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, 4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == len(self.layers) - 1 else F.relu(layer(x))
        return x.sigmoid()


@ARCHITECTURES.register("detr")
class DETR(nn.Module):
    """The detector, a :class:`~vitpos.models.host.Host` whose one stage is the encoder.

    ``forward(images)`` returns DETR's output dict:
    ``pred_logits`` (B, Q, C + 1), ``pred_boxes`` (B, Q, 4) and, with ``aux_loss``, ``aux_outputs``
    (one dict per earlier decoder layer). Any image whose sides are multiples of the stride works.

    The host names (``stages``, ``stage_grids``, ``forward_features``, ``forward_tokens``,
    ``no_weight_decay``, ``position_parameters``) describe the encoder, so tools that read a
    host's stage read DETR's encoder the same way.
    """

    config_class = DetrConfig

    def __init__(self, cfg: DetrConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        self.num_features = cfg.embed_dim
        self.num_prefix_tokens = 0
        self.backbone: nn.Module = (
            ConvStem(cfg.in_chans, cfg.stem_widths)
            if cfg.backbone is None
            else HostBackbone(cfg.backbone, cfg.backbone_stage)
        )
        self.input_proj = nn.Conv2d(cfg.backbone_channels, cfg.embed_dim, kernel_size=1)
        self.encoder = DetrEncoder(cfg)
        self.decoder = DetrDecoder(cfg)
        self.class_embed = nn.Linear(cfg.embed_dim, cfg.num_classes + 1)
        self.bbox_embed = BoxHead(cfg.embed_dim)
        self._init_transformer()

    def _init_transformer(self) -> None:
        """Xavier-uniform weights in the encoder's and decoder's linear layers (DETR; iRPE supplement §5);
        position tables keep their own initialisation."""
        for part in (self.encoder, self.decoder):
            for name, module in part.named_modules():
                if isinstance(module, nn.Linear) and "relative" not in name:
                    nn.init.xavier_uniform_(module.weight)

    @property
    def pretrained_host(self) -> nn.Module | None:
        """The part a classifier's weights initialise (``vitpos train --init``): the backbone host, if any."""
        return self.backbone.host if isinstance(self.backbone, HostBackbone) else None

    @property
    def stages(self) -> nn.ModuleList:
        """The encoder's stage (one): its slots and blocks."""
        return self.encoder.stages

    def stage_grids(self, image_hw: tuple[int, int]) -> list[Grid]:
        return self.cfg.stage_grids(image_hw)

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != self.cfg.in_chans:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"DETR takes images (B, {self.cfg.in_chans}, H, W), got {shape}")
        self.stage_grids((x.shape[-2], x.shape[-1]))

    def forward_tokens(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:  # B, H*W, D
        """The encoder's output tokens (its memory)."""
        return self._encode(x, padding_mask)[0]

    def forward_features(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The encoder's output as one map (B, D, H/s, W/s), in a list as every host gives it."""
        tokens, grid, _ = self._encode(x, padding_mask)
        return [tokens_to_map(tokens, grid)]

    def _encode(self, x: torch.Tensor, padding_mask: torch.Tensor | None) -> tuple[torch.Tensor, Grid, Padding | None]:
        self._check_input(x)
        stem = isinstance(self.backbone, ConvStem)
        features = self.input_proj(self.backbone(x) if stem else self.backbone(x, padding_mask))
        grid = (features.shape[-2], features.shape[-1])
        tokens = features.flatten(2).transpose(1, 2)
        if padding_mask is None:
            return self.encoder(tokens, grid), grid, None
        padding = grid_padding(padding_mask.to(x.device), grid, x.shape[0]).or_none()
        if padding is None:
            return self.encoder(tokens, grid), grid, None
        return self.encoder(tokens, grid, padding.mask), grid, padding

    def forward_head(
        self, tokens: torch.Tensor, pre_logits: bool = False, grid: Grid | None = None, padding: Padding | None = None
    ) -> dict | torch.Tensor:
        """The encoder's tokens (B, H*W, D) on ``grid`` (default: the training grid) -> the output dict
        (the last decoder layer's, plus ``aux_outputs``); ``pre_logits``: the last layer's query features (B, Q, D).
        ``padding`` (of ``grid``): a padded batch's padding, which the decoder does not attend to."""
        h, w = self.cfg.grid if grid is None else grid
        grid = (h, w)
        if tokens.shape[1] != grid[0] * grid[1]:
            raise ValueError(
                f"{tokens.shape[1]} tokens do not fill the grid {grid[0]}x{grid[1]}; pass the grid they were encoded on"
            )
        stage = self.stages[0]
        assert isinstance(stage, Stage)
        pos = stage.position_encoding(grid, padding)
        memory_padding = None if padding is None else padding.tokens()
        hidden = self.decoder(tokens, None if pos is None else pos.to(tokens.dtype), memory_padding)
        if pre_logits:
            return hidden[-1]
        logits, boxes = self.class_embed(hidden), self.bbox_embed(hidden)
        out = {"pred_logits": logits[-1], "pred_boxes": boxes[-1]}
        if self.cfg.aux_loss:
            out["aux_outputs"] = [
                {"pred_logits": a, "pred_boxes": b} for a, b in zip(logits[:-1], boxes[:-1], strict=True)
            ]
        return out

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> dict:
        """Images (B, C, H, W) and DETR's ``padding_mask`` (B, H, W), True at padded pixels, or None."""
        tokens, grid, padding = self._encode(x, padding_mask)
        out = self.forward_head(tokens, grid=grid, padding=padding)
        assert isinstance(out, dict)  # the output dict, as pre_logits is False
        return out

    def criterion(self) -> SetCriterion:
        """DETR's set loss with this model's weights."""
        cfg = self.cfg
        return SetCriterion(cfg.num_classes, LossWeights(cfg.cost_class, cfg.cost_bbox, cfg.cost_giou, cfg.eos_coef))

    def position_parameters(self) -> dict[str, nn.Parameter]:
        """Every parameter of the four slots, by name."""
        parts = (".absolute.", ".join.", ".conditional.", ".relative.")
        return {n: p for n, p in self.named_parameters() if any(part in f".{n}" for part in parts)}

    def no_weight_decay(self) -> set[str]:
        """Parameter names exempt from weight decay: the position parameters."""
        return set(self.position_parameters())
