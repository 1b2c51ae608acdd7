"""Shared pytest configuration.

Under CI (``CI`` set in the environment) hypothesis runs derandomized, so a CI run is
reproducible; locally it explores new examples on every run.
"""

import os
import shutil
import sys
import tempfile

from hypothesis import settings

# ----------------------------------------------------------------------------- JAX compilation cache of the run
# One persistent compilation cache for the whole test run, in a temporary folder, shared by the pytest-xdist
# workers and the subprocesses the tests start (notebook kernels, the 4-device sharding run) through the
# environment: a loop compiled for a problem shape by one process is read from the cache by the others
# (about 0.1 s instead of 1-2 s on a CPU). Only compilations of 0.5 s or more are stored. Set here, in the
# tests' configuration: the library itself never changes JAX's configuration. A cache folder chosen by the
# user (``JAX_COMPILATION_CACHE_DIR``) is used as it is and kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="metricopt-test-jax-cache-")
    os.environ["METRICOPT_TEST_JAX_CACHE_OWNER"] = str(os.getpid())  # the process that removes it at the end
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
if "jax" in sys.modules:  # imported before this file (e.g. by a plugin): the variables above came too late
    sys.modules["jax"].config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    sys.modules["jax"].config.update("jax_persistent_cache_min_compile_time_secs",
                                     float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))


def pytest_unconfigure(config):
    if os.environ.get("METRICOPT_TEST_JAX_CACHE_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# ----------------------------------------------------------------------------- shared data and solves
# Session-scoped: each is built once per run, however many modules use it (they must not modify them).
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def iris_std():
    """scikit-learn's iris, standardized: ``(X, y)``, 150 x 4."""
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="session")
def wine_std():
    """scikit-learn's wine, standardized: ``(X, y)``, 178 x 13."""
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="session")
def iris_lmnn(iris_std):
    """LMNN (k=3, mu=0.5) on standardized iris."""
    import metricopt

    return metricopt.LMNNProblem(*iris_std)


@pytest.fixture(scope="session")
def iris_lmnn_exact(iris_lmnn):
    """Its exact (cvxpy) solution, certified."""
    sol = iris_lmnn.solve(backend="cvxpy")
    assert np.isfinite(sol.objective)
    return sol
