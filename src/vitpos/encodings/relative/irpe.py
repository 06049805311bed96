"""iRPE (Wu et al., ICCV 2021): bias and contextual relative position encodings for ViTs.

Slot string ``irpe[:METHOD][:MODE][:ON][:unshared][:clip][:squared][:round][:unscaled][:ratio=R]``:

* METHOD — ``euclidean``, ``quant``, ``cross`` or ``product`` (default; Eq. 19-25);
* MODE — ``bias`` (a learnable scalar per bucket, Eq. 14) or ``ctx`` (default; a learnable
  vector per bucket that meets the query, key or value, Eq. 15-17);
* ON — the targets, a subsequence of ``qkv`` (default ``k``); bias mode acts on q and/or k only;
* ``unshared`` — one table per head instead of one shared by the heads (Table 2);
* ``clip`` — the clip function h instead of the piecewise g (Table 3);
* ``squared`` — Quantization on squared distances, as the released code does (see ``buckets.py``);
* ``round`` — Euclidean buckets of the distance rounded to an integer before g, as the released
  code does; Eq. 20 applies g to the exact distance (the default). The ids differ only for
  distances beyond alpha;
* ``unscaled`` — bias tables enter the logits as they are; Eq. 13 divides b_ij by sqrt(d_z)
  (the default here), the released code does not;
* ``ratio`` — alpha : beta : gamma = 1 : 2 : 8 with alpha = ratio (default 1.9, which gives
  Product 7 x 7 = 49 buckets, 50 with the prefix bucket).

Tables start at zero (supplement §2). The encodings declare their tables and bucket ids
(:class:`vitpos.attention.RelativeTerms`); :func:`vitpos.attention.attention` computes the
terms on q and k (products onto the K buckets, then lookups by bucket id, Eq. 27-28) and on v.
Following Eq. 16 literally, the encoding on queries uses r^Q_ij = p^Q_{I(i,j)}; the released
code indexes it with I(j, i), a permutation of the same table, so loading its weights permutes
the rows (:mod:`vitpos.weights.irpe`) and needs no option here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ...attention.terms import RelativeTerms
from ...grid import Grid
from ...registry import RELATIVE
from ...spec import SlotSpec, SpecError
from ..base import SlotContext, SlotEntry
from .base import RelativeBias, RelativePosition
from .buckets import METHODS, BucketedEncoding, Bucketing, IndexFunction

__all__ = ["IRPE", "IRPEOptions", "IRPEBias", "IRPEContextual"]

MODES = ("bias", "ctx")
TARGETS = "qkv"
SWITCHES = ("unshared", "clip", "squared", "round", "unscaled")


def _ratio(text: str) -> float:
    value = float(text)
    if not (value >= 0.5 and math.isfinite(value)):
        raise ValueError("ratio must be a finite number >= 0.5, so that beta = 2 * ratio gives more than one bucket")
    return value


@dataclass(frozen=True)
class IRPEOptions:
    """The parsed choices of one iRPE slot value."""

    method: str = "product"
    mode: str = "ctx"
    on: str = "k"
    shared: bool = True
    index: str = "piecewise"
    quant: str = "rank"
    ratio: float = 1.9
    scaled: bool = True
    round_distance: bool = False

    @classmethod
    def from_spec(cls, spec: SlotSpec) -> IRPEOptions:
        """Read ``spec``; every invalid combination raises :class:`SpecError` saying what to change."""
        spec.check_no_placement()
        picked: dict[str, str] = {}
        switches: set[str] = set()
        for flag in spec.flags:
            if flag in METHODS:
                kind = "method"
            elif flag in MODES:
                kind = "mode"
            elif set(flag) <= set(TARGETS):
                kind = "target set"
                if flag != "".join(t for t in TARGETS if t in flag):
                    raise SpecError(f"'{spec}': write the targets {flag!r} in q, k, v order without repeats, e.g. 'qk'")
            elif flag in SWITCHES:
                if flag in switches:
                    raise SpecError(f"'{spec}': flag {flag!r} is given twice")
                switches.add(flag)
                continue
            else:
                raise SpecError(
                    f"'{spec}': unknown flag {flag!r}; valid flags: a method ({', '.join(METHODS)}), a mode "
                    f"({', '.join(MODES)}), targets (a subsequence of 'qkv') and {', '.join(SWITCHES)}"
                )
            if kind in picked:
                raise SpecError(f"'{spec}': more than one {kind} ({picked[kind]!r} and {flag!r}); give one")
            picked[kind] = flag
        ratio = spec.typed_options({"ratio": _ratio}).get("ratio", cls.ratio)
        options = cls(
            method=picked.get("method", cls.method),
            mode=picked.get("mode", cls.mode),
            on=picked.get("target set", cls.on),
            shared="unshared" not in switches,
            index="clip" if "clip" in switches else "piecewise",
            quant="squared" if "squared" in switches else "rank",
            ratio=ratio,
            scaled="unscaled" not in switches,
            round_distance="round" in switches,
        )
        if options.mode == "bias" and "v" in options.on:
            raise SpecError(
                f"'{spec}': bias mode adds a scalar to the attention logits (Eq. 14) and cannot act on values; "
                "use 'ctx' for v (e.g. irpe:product:ctx:qkv) or drop v from the targets"
            )
        if "squared" in switches and options.method != "quant":
            raise SpecError(f"'{spec}': 'squared' changes the Quantization method only; use it with 'quant'")
        if "round" in switches and options.method != "euclidean":
            raise SpecError(f"'{spec}': 'round' changes the Euclidean method only; use it with 'euclidean'")
        if "unscaled" in switches and options.mode != "bias":
            raise SpecError(f"'{spec}': 'unscaled' applies to bias mode; contextual terms are scaled like q.k")
        return options

    def bucketing(self) -> Bucketing:
        """The bucket mapping these options describe."""
        index = IndexFunction.from_ratio(self.index, self.ratio)
        return Bucketing(self.method, index, quant=self.quant, round_distance=self.round_distance)


@RELATIVE.register("irpe")
class IRPE(SlotEntry):
    """The ``irpe`` slot value: builds :class:`IRPEBias` or :class:`IRPEContextual`."""

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        return dataclasses.asdict(IRPEOptions.from_spec(spec))

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], layer: int = 0, **host: Any) -> RelativePosition:
        irpe = IRPEOptions(**options)
        return (IRPEBias if irpe.mode == "bias" else IRPEContextual)(ctx, irpe)


class IRPEBias(BucketedEncoding, RelativeBias):
    """Bias mode: b_ij = r_{I(i,j)} with a learnable scalar per bucket (per head if unshared).

    A scalar meets neither query nor key, so "on q" and "on k" each add one table indexed by
    the same I(i, j); both together sum two tables.
    """

    bias_q: nn.Parameter | None
    bias_k: nn.Parameter | None

    def __init__(self, ctx: SlotContext, options: IRPEOptions = IRPEOptions(mode="bias")) -> None:
        super().__init__()
        self.options = options
        self.init_buckets(options.bucketing(), ctx.num_prefix_tokens)
        rows = 1 if options.shared else ctx.num_heads
        # Eq. 13 divides b_ij by sqrt(d_z) like the dot product; position_bias is in logit units
        self.scale = ctx.head_dim**-0.5 if options.scaled else 1.0
        for target in ("q", "k"):
            table = nn.Parameter(torch.zeros(rows, self.num_buckets)) if target in options.on else None
            self.register_parameter(f"bias_{target}", table)

    def tables(self) -> list[torch.Tensor]:
        """The bias tables of the targets (q and/or k)."""
        return [t for t in (self.bias_q, self.bias_k) if t is not None]

    def bucket_table(self) -> torch.Tensor:  # heads or 1, K
        """The summed tables of the targets in logit units: the bias of each bucket."""
        return functools.reduce(operator.add, self.tables()) * self.scale

    def bucket_bias_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        return self.bucket_terms(grid, num_prefix_tokens, device, bias_table=self.bucket_table())

    def extra_repr(self) -> str:
        return f"{self.options}, num_buckets={self.num_buckets}"


class IRPEContextual(BucketedEncoding, RelativePosition):
    """Contextual mode: learnable vectors r_ij = p_{I(i,j)} on queries, keys and/or values.

    Tables are (K, head_dim), or (heads, K, head_dim) when unshared. Terms on q and k are
    computed as (q . P^T) onto the K buckets and then gathered by bucket id (Eq. 27-28); the
    term on v sums the attention weights per bucket and multiplies once by the value table.
    """

    table_q: nn.Parameter | None
    table_k: nn.Parameter | None
    table_v: nn.Parameter | None

    def __init__(self, ctx: SlotContext, options: IRPEOptions = IRPEOptions()) -> None:
        super().__init__()
        self.options = options
        self.init_buckets(options.bucketing(), ctx.num_prefix_tokens)
        shape = (self.num_buckets, ctx.head_dim) if options.shared else (ctx.num_heads, self.num_buckets, ctx.head_dim)
        for target in TARGETS:
            table = nn.Parameter(torch.zeros(shape)) if target in options.on else None
            self.register_parameter(f"table_{target}", table)

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        return self.bucket_terms(
            grid, num_prefix_tokens, device, key_table=self.table_k, query_table=self.table_q, value_table=self.table_v
        )

    def extra_repr(self) -> str:
        return f"{self.options}, num_buckets={self.num_buckets}"
