"""Tools that show what a position encoding knows: probes, similarity, attention, equivariance, ..."""

from .attention import attention_maps, mean_attention_distance, query_maps
from .awareness import AwarenessResult, position_awareness, token_features
from .equivariance import EquivarianceResult, equivariance_error, interior_mask, translate
from .probes import ProbeResult, probe_table
from .relative_maps import bias_maps, reference_lattice, relative_logit_bias
from .similarity import locality, similarity_maps
from .tables import NoPositionTableError, absolute_table, layer_position_encodings

__all__ = [
    "AwarenessResult",
    "EquivarianceResult",
    "NoPositionTableError",
    "ProbeResult",
    "absolute_table",
    "attention_maps",
    "bias_maps",
    "equivariance_error",
    "interior_mask",
    "layer_position_encodings",
    "locality",
    "mean_attention_distance",
    "position_awareness",
    "probe_table",
    "query_maps",
    "reference_lattice",
    "relative_logit_bias",
    "similarity_maps",
    "token_features",
    "translate",
]
