"""The linear models the probes fit (scikit-learn), shared by every probe in ``analysis``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

__all__ = ["linear_classifier", "linear_regressor", "single_threaded"]


def linear_classifier() -> Pipeline:
    """Standardise, then L2 logistic regression (scikit-learn defaults, C = 1)."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def linear_regressor() -> Pipeline:
    """Standardise, then ordinary least squares (multi-output)."""
    return make_pipeline(StandardScaler(), LinearRegression())


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run BLAS/OpenMP with one thread: the probes' matrices are small, and threads that
    compete with torch's own pool make them tens of times slower."""
    with threadpool_limits(limits=1):
        yield
