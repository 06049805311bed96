"""The linear models the probes fit: scikit-learn's logistic regression and a closed-form ridge path."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

__all__ = ["linear_classifier", "ridge_predictions", "single_threaded"]


def linear_classifier() -> LogisticRegression:
    """L2 logistic regression on the raw features (scikit-learn's defaults, C = 1)."""
    return LogisticRegression(max_iter=2000)


def ridge_predictions(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, alphas: Sequence[float]
) -> np.ndarray:
    """Predictions (len(alphas), n_test, outputs) of ridge regressions on standardised features.

    Each penalty minimises ||y - b - X w||² + alpha ||w||² (scikit-learn's ``Ridge`` after a
    ``StandardScaler``); alpha = 0 is ordinary least squares with the minimum-norm solution
    (``LinearRegression``). One SVD serves every penalty.
    """
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0
    train, test = (x_train - mean) / std, (x_test - mean) / std
    y_mean = y_train.mean(axis=0)
    u, s, vt = np.linalg.svd(train, full_matrices=False)
    keep = s > s.max(initial=0.0) * max(train.shape) * np.finfo(float).eps  # rank cut, as lstsq
    u, s, vt = u[:, keep], s[keep], vt[keep]
    projected = u.T @ (y_train - y_mean)  # rank, outputs
    test_basis = test @ vt.T  # n_test, rank
    out = [test_basis @ ((s / (s**2 + alpha))[:, None] * projected) + y_mean for alpha in alphas]
    return np.stack(out)


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run BLAS/OpenMP with one thread: the probes' matrices are small, and threads that
    compete with torch's own pool make them tens of times slower."""
    with threadpool_limits(limits=1):
        yield
