"""pyproject.toml reads without a setuptools warning (an SPDX license string, not the deprecated table)."""

import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_configures_setuptools_without_warnings():
    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = pyprojecttoml.apply_configuration(Distribution(), REPO / "pyproject.toml")
    assert [str(w.message).splitlines()[0] for w in caught] == []
    assert dist.metadata.license_expression == "Apache-2.0"
