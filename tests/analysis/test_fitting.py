"""The closed-form ridge path equals scikit-learn's Ridge / LinearRegression after standardising."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from vitpos.analysis.fitting import ridge_predictions


@pytest.mark.parametrize("rows", [40, 5])  # over- and under-determined
def test_ridge_path_equals_scikit_learn(rows):
    rng = np.random.default_rng(0)
    x, y, test = rng.normal(size=(rows, 8)), rng.normal(size=(rows, 2)), rng.normal(size=(6, 8))
    x[:, 3] = 1.5  # a constant feature, as a fixed table can have
    paths = ridge_predictions(x, y, test, [0.0, 0.3, 30.0])
    assert paths.shape == (3, 6, 2)
    ols = make_pipeline(StandardScaler(), LinearRegression()).fit(x, y).predict(test)
    assert np.allclose(paths[0], ols, atol=1e-8)
    for k, alpha in enumerate([0.3, 30.0], start=1):
        ridge = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(x, y).predict(test)
        assert np.allclose(paths[k], ridge, atol=1e-8)
