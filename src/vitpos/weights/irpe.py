"""The iRPE model zoo (Wu et al., ICCV 2021; microsoft/Cream ``iRPE/DeiT-with-iRPE``).

A DeiT (:mod:`.vit` layout) whose blocks add ``attn.rpe_{q,k,v}.lookup_table_weight`` (contextual
mode) or ``lookup_table_bias`` (bias mode); the Cross method splits each into
``rp_rows``/``rp_cols``. Released shapes, with H' = 1 when shared by the heads: q and k
(H', head_dim, K), v (H', K, head_dim), bias (H', K); K counts the class-token bucket, last.

Where the released forward pass differs from the paper's equations (vitpos's default):

* query term: the released code adds ``rpe_q(k * scale).transpose(2, 3)``, so the query
  table is indexed with I(j, i), the bucket of the reversed offset. The bucket functions are
  odd, so this is a fixed permutation of the rows: Product id t -> S_r S_c - 1 - t (48 - t for
  7 x 7), each Cross axis r -> S - 1 - r, Euclidean and Quantization unchanged, the class-token
  bucket unchanged. Loading permutes the rows (:func:`query_order`); no option is needed.
* bias mode: the released bias is added unscaled; loading selects ``unscaled`` (and a table
  loaded into a scaled model is divided by its scale, which is the same function).
* Euclidean buckets: the released code rounds the distance before g; loading selects ``round``.
* Quantization buckets: the released code applies g to the squared distance; loading selects
  ``squared`` (already in the presets).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Any

import torch

from ..config import HostConfig
from ..encodings.relative.buckets import Bucketing
from ..encodings.relative.irpe import IRPEBias, IRPEContextual, IRPEOptions
from ..spec import SlotSpec
from .layout import Layout, Target
from .vit import STAGE, convert_vit, submodule, vit_geometry

__all__ = ["IRPEZoo", "query_order"]

RPE_KEY = re.compile(
    r"blocks\.(\d+)\.attn\.rpe_([qkv])\.(?:(rp_rows|rp_cols)\.)?(lookup_table_weight|lookup_table_bias)"
)


def query_order(bucketing: Bucketing, num_prefix_tokens: int) -> torch.Tensor:
    """Row t of vitpos's query table is row ``order[t]`` of the released one (the reversed offset's bucket)."""
    extra = int(num_prefix_tokens > 0)
    if bucketing.method == "product":
        count = bucketing.index.size * bucketing.column_index.size
        parts = [(torch.arange(count).flip(0), extra)]
    elif bucketing.method == "cross":
        parts = [(torch.arange(size).flip(0), extra) for size in (bucketing.index.size, bucketing.column_index.size)]
    else:
        parts = [(torch.arange(bucketing.index.size), extra)]
    order, start = [], 0
    for ids, prefix in parts:
        order.append(torch.cat([ids, torch.arange(ids.numel(), ids.numel() + prefix)]) + start)
        start += ids.numel() + prefix
    return torch.cat(order)


def _relative(target: Target, block: int) -> tuple[str, Any]:
    path = f"{STAGE}blocks.{block}.attn.relative"
    module = submodule(target.model, path)
    encoding = getattr(module, "encoding", None)  # LaPE's normalised bias wraps the encoding
    if isinstance(encoding, torch.nn.Module):
        path, module = path + ".encoding", encoding
    return path, module


def _table(parts: dict[str | None, torch.Tensor], bucket_axis: int) -> torch.Tensor:
    if None in parts:
        return parts[None]
    return torch.cat([parts["rp_rows"], parts["rp_cols"]], dim=bucket_axis)


def convert_rpe(state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
    """Pop the ``rpe_*`` keys whose block has a matching iRPE encoding; return vitpos tables."""
    found: dict[tuple[int, str, str], dict[str | None, tuple[str, torch.Tensor]]] = defaultdict(dict)
    for key in list(state):
        match = RPE_KEY.fullmatch(key)
        if match:
            block, on, part, kind = match.groups()
            found[(int(block), on, kind)][part] = (key, state[key])
    out: dict[str, torch.Tensor] = {}
    for (block, on, kind), parts in found.items():
        path, module = _relative(target, block)
        contextual = kind == "lookup_table_weight"
        if not isinstance(module, IRPEContextual if contextual else IRPEBias):
            continue
        if (None in parts) == (module.options.method == "cross"):
            continue
        # buckets are the last axis of q/k weights and biases, the middle one of v weights
        bucket_axis = 1 if (contextual and on == "v") else -1
        table = _table({p: t for p, (_, t) in parts.items()}, bucket_axis)
        order = query_order(module.bucketing, int(module.prefix_bucket))
        if on == "q" and table.shape[bucket_axis] == order.numel():  # else the shape check names the mismatch
            table = table.index_select(bucket_axis, order.to(table.device))
        if contextual:
            table = table if on == "v" else table.transpose(-1, -2)  # H', K, head_dim
            table = table[0] if module.options.shared and table.shape[0] == 1 else table
            out[f"{path}.table_{on}"] = table
        else:
            assert isinstance(module, IRPEBias)  # checked above for a bias-mode key
            out[f"{path}.bias_{on}"] = table / module.scale
        for key, _ in parts.values():
            state.pop(key)
    return out


def released_relative(spec: str) -> str:
    """An iRPE slot string with the released code's options switched on."""
    parsed = SlotSpec.parse(spec)
    if parsed.name != "irpe":
        return spec
    options = IRPEOptions.from_spec(parsed)
    extra = []
    if options.method == "euclidean" and not options.round_distance:
        extra.append("round")
    if options.method == "quant" and options.quant != "squared":
        extra.append("squared")
    if options.mode == "bias" and options.scaled:
        extra.append("unscaled")
    return str(dataclasses.replace(parsed, flags=(*parsed.flags, *extra))) if extra else spec


class IRPEZoo(Layout):
    """DeiT with iRPE as released by its authors."""

    name = "irpe"
    description = "iRPE model zoo: DeiT with blocks.N.attn.rpe_{q,k,v}.lookup_table_*"
    archs = ("vit",)
    width_key = ("patch_embed.proj.weight", 0)

    def matches(self, keys: set[str]) -> bool:
        return any(RPE_KEY.fullmatch(k) for k in keys)

    def convert(self, state: dict[str, torch.Tensor], target: Target) -> dict[str, torch.Tensor]:
        return {**convert_rpe(state, target), **convert_vit(state, target)}

    def released_config(self, cfg: HostConfig) -> HostConfig:
        relative = released_relative(cfg.position.relative)
        return cfg if relative == cfg.position.relative else cfg.replace(relative=relative)

    def stored_geometry(self, state: dict[str, torch.Tensor], cfg: HostConfig) -> dict[str, Any]:
        return vit_geometry(state, cfg)

    def hint(self, unmapped: list[str]) -> str:
        if any(RPE_KEY.fullmatch(k) for k in unmapped):
            return (
                "the model's iRPE encoding does not match the checkpoint's (targets, mode, method, shared heads); "
                "create the preset named after the released model (vitpos models 'deit_*_ctx_*')"
            )
        return ""
