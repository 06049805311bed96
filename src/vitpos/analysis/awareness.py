"""Absolute-position awareness: can a linear probe read each token's own cell from its features?

Tokens of a model without any position signal carry only content, so on inputs whose content
says nothing about position the probe scores R² ~0; an absolute table makes position linearly
readable, and CPVT argues zero padding lets a PEG model learn it too (CPVT §3.2, appendix B.3).
The probe is a linear regression (least squares) from a token's features to its (column, row); folds split
the images, so it is scored on images it never saw.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from sklearn.metrics import r2_score
from sklearn.model_selection import GroupKFold
from torch import nn

from ..errors import ConfigError
from ..grid import grid_coords, map_to_tokens
from ..progress import progress
from .fitting import ridge_predictions, single_threaded
from .stages import as_host, host_stage, stage_count, stage_grid, stage_index

__all__ = ["AwarenessResult", "token_features", "position_awareness"]


@dataclass(frozen=True)
class AwarenessResult:
    """Cross-validated scores of the token-to-position probe."""

    r2: float
    """R² of the (column, row) prediction, mean over the two; 1 is perfect, ~0 is no information."""
    cell_accuracy: float
    """Fraction of tokens whose rounded prediction is exactly their cell, in [0, 1]."""

    def to_dict(self) -> dict[str, float]:
        """Plain dict, for JSON."""
        return asdict(self)


@torch.no_grad()
def token_features(model: nn.Module, images: torch.Tensor, block: int | None = None, stage: int = -1) -> torch.Tensor:
    """Patch-token features (B, H*W, D) of ``stage`` (default the last): the output of its block
    ``block``, or without ``block`` the stage's feature map (the last stage's: after the final norm)."""
    host, s = as_host(model), stage_index(model, stage)
    module = host_stage(model, s)
    was_training = model.training
    model.eval()
    try:
        if block is None:
            if s == stage_count(model) - 1:
                return host.forward_tokens(images)[:, module.num_prefix_tokens :]
            return map_to_tokens(host.forward_features(images)[s])
        blocks = module.blocks
        if not -len(blocks) <= block < len(blocks):
            where = f"stage {s} has" if stage_count(model) > 1 else "the model has"
            raise ValueError(f"block {block} does not exist; {where} {len(blocks)} blocks")
        captured: list[torch.Tensor] = []
        handle = blocks[block].register_forward_hook(lambda _m, _i, out: captured.append(out))
        try:
            model(images)
        finally:
            handle.remove()
        return captured[0][:, module.num_prefix_tokens :]
    finally:
        model.train(was_training)


def position_awareness(
    model: nn.Module, images: torch.Tensor, *, block: int | None = None, stage: int = -1, folds: int = 5
) -> AwarenessResult:
    """Fit and score, with ``folds``-fold cross-validation over images, the token-to-cell probe
    on the features of ``stage`` (see :func:`token_features`)."""
    batch = images.shape[0]
    if batch < 2:
        raise ValueError("position awareness needs at least 2 images (the folds split images)")
    if not 2 <= folds <= batch:
        raise ConfigError(
            f"folds = {folds}: the folds split the {batch} images, so use 2 to {batch} folds (or more images)"
        )
    grid = stage_grid(model, (images.shape[-2], images.shape[-1]), stage)
    feats = token_features(model, images, block, stage)
    n = grid[0] * grid[1]
    x = feats.reshape(batch * n, -1).double().cpu().numpy()
    cells = grid_coords(grid, dtype=torch.float64).numpy()
    y = np.tile(cells, (batch, 1))
    groups = np.repeat(np.arange(batch), n)
    predicted = np.zeros_like(y)
    with single_threaded():
        splits = GroupKFold(n_splits=folds).split(x, y, groups)
        for train, test in progress(splits, "awareness folds", total=folds, unit="fold"):
            predicted[test] = ridge_predictions(x[train], y[train], x[test], [0.0])[0]
    hits = (np.rint(predicted) == y).all(axis=1)
    return AwarenessResult(float(r2_score(y, predicted)), float(hits.mean()))
