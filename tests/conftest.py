"""Shared pytest configuration.

Under CI (``CI`` set in the environment) hypothesis runs derandomized, so a CI run is
reproducible; locally it explores new examples on every run.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config):
    """Under pytest-xdist, share the cores between the workers: each worker's BLAS (and the
    subprocesses it starts: CLI runs, notebook kernels) gets ``cores // workers`` threads
    (at least one), as scikit-learn's own test suite does. Two workers on two cores would
    otherwise run four OpenBLAS threads, whose spin-waits slow every small product."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    threads = max(1, (os.cpu_count() or 1) // int(workers))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    from threadpoolctl import threadpool_limits

    config._metricopt_blas_limit = threadpool_limits(limits=threads, user_api="blas")


# ----------------------------------------------------------------------------- the status policy, on every solve
@pytest.fixture(autouse=True)
def _optimal_means_certified(monkeypatch):
    """Every status the one status policy decides during any test: ``optimal`` only for a convex problem and only
    with a certificate within its ``tol`` (with its lower bound not above its upper), or where the caller declined
    one (``certify=None``: the solver's own word)."""
    from metricopt.certify import policy

    decide = policy.decide

    def checked(report, certificate=None, convex=True):
        out = decide(report, certificate, convex)
        if out[0] is policy.Status.OPTIMAL:
            assert convex, "a non-convex problem called optimal"
            if isinstance(certificate, policy.Certificate):
                assert certificate.rel_gap <= certificate.tol, (
                    f"optimal at a certified relative gap {certificate.rel_gap:.3e} above tol {certificate.tol:.1e}")
                assert certificate.lower <= certificate.upper + 1e-12 * max(1.0, abs(certificate.upper))
            else:
                assert certificate is policy.NoCertificate.DECLINED, f"optimal without a certificate ({certificate})"
        return out

    monkeypatch.setattr(policy, "decide", checked)


# ----------------------------------------------------------------------------- shared data and solves
# Session-scoped: each is built once per run, however many modules use it (they must not modify them).
import numpy as np  # noqa: E402


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
