"""Tools that show what a position encoding knows: probes, similarity, attention, equivariance, ...

Every tool reads a model through the host protocol (:class:`vitpos.models.host.Host`), so it runs
on the ViT, PVT and Swin alike; ``stage`` arguments pick a stage of a pyramid (default: the last).
"""

from .attention import AttentionMap, attention_maps, mean_attention_distance, query_maps
from .awareness import AwarenessResult, position_awareness, token_features
from .equivariance import EquivarianceResult, equivariance_error, interior_mask, translate
from .probes import ProbeResult, probe_table
from .relative_maps import RelativeLayer, bias_maps, reference_lattice, relative_attention_layers, relative_logit_bias
from .similarity import locality, similarity_maps
from .stages import native_grid, stage_grid, stage_index
from .tables import NoPositionTableError, absolute_table, layer_position_encodings

__all__ = [
    "AttentionMap",
    "AwarenessResult",
    "EquivarianceResult",
    "NoPositionTableError",
    "ProbeResult",
    "RelativeLayer",
    "absolute_table",
    "attention_maps",
    "bias_maps",
    "equivariance_error",
    "interior_mask",
    "layer_position_encodings",
    "locality",
    "mean_attention_distance",
    "native_grid",
    "position_awareness",
    "probe_table",
    "query_maps",
    "reference_lattice",
    "relative_attention_layers",
    "relative_logit_bias",
    "similarity_maps",
    "stage_grid",
    "stage_index",
    "token_features",
    "translate",
]
