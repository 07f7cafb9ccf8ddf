"""Shared fixtures: `torch` (PyTorch, for comparisons) skips the test with a reason where
python3-torch is not installed; smelt never needs it."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="python3-torch is not installed: PyTorch comparison skipped")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
