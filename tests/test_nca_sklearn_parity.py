"""``mo.NCA`` against scikit-learn's ``NeighborhoodComponentsAnalysis`` API (issue 30, item 6).

Our own versions of the cases of scikit-learn's ``sklearn/neighbors/tests/test_nca.py`` (1.9), run on
``mo.NCA``: same data and the same claims, metricopt's messages (``InputError`` is a ``ValueError``)
and, where a case tests a scikit-learn internal (its private loss), the nearest
public metricopt equivalent or a skip that says why.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from scipy.optimize import check_grad
from sklearn import clone
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances

import metricopt as mo
from metricopt.backends.jax import evaluate

_perm = np.random.RandomState(0).permutation(150)
IRIS_X, IRIS_Y = load_iris(return_X_y=True)
IRIS_X, IRIS_Y = IRIS_X[_perm], IRIS_Y[_perm]

quiet = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_simple_example():
    # opposite labels side by side: after NCA each point's nearest neighbour is its class mate
    X = np.array([[0, 0], [0, 1], [2, 0], [2, 1]], dtype=float)
    y = np.array([1, 0, 1, 0])
    Z = mo.NCA(n_components=2, init="identity", random_state=42).fit(X, y).transform(X)
    np.testing.assert_array_equal(pairwise_distances(Z).argsort()[:, 1], [2, 3, 0, 1])


def test_toy_example_collapse_points():
    # two class-0 points and a class-1 point (a class of one) between them: the optimum maps all three
    # to one point, where f = 1 (each class-0 point picks its class mate or the class-1 point alike)
    rng = np.random.RandomState(42)
    two = rng.randn(2, 5)
    X = np.vstack([two, two.mean(axis=0)])
    y = np.array([0, 0, 1])
    seen = {}
    nca = mo.NCA(random_state=42, callback=lambda A, n_iter: seen.update(A=A, n_iter=n_iter))
    Z = nca.fit_transform(X, y)
    np.testing.assert_array_almost_equal(Z - Z[0], 0.0)
    assert nca.problem_.objective_at(seen["A"].reshape(-1, 5)) == pytest.approx(-1.0, abs=1e-6)


def test_finite_differences():
    # the gradient of the loop's objective against finite differences (scikit-learn: its _loss_grad_lbfgs)
    rng = np.random.RandomState(0)
    X, y = make_classification(random_state=0)
    r = rng.randint(1, X.shape[1] + 1)
    A = rng.randn(r, X.shape[1])
    problem = mo.NCAProblem(X, y, n_components=r)
    diff = check_grad(lambda a: problem.objective_at(a.reshape(r, -1)),
                      lambda a: np.asarray(evaluate(problem, a.reshape(r, -1))[2]).ravel(), A.ravel())
    assert diff == pytest.approx(0.0, abs=1e-4)


def test_params_validation():
    X, y = np.arange(12.0).reshape(4, 3), np.array([1, 1, 2, 2])
    with pytest.raises(ValueError, match=re.escape("shape (5, 3)")):  # more rows than features
        mo.NCA(init=np.random.RandomState(42).rand(5, 3)).fit(X, y)
    with pytest.raises(ValueError, match="n_components"):
        mo.NCA(n_components=10).fit(X, y)


def test_transformation_dimensions():
    X, y = np.arange(12.0).reshape(4, 3), np.array([1, 1, 2, 2])
    with pytest.raises(ValueError):  # init's input dimension is not X's
        mo.NCA(init=np.array([[1.0, 2], [3, 4]])).fit(X, y)
    with pytest.raises(ValueError):  # more output than input dimensions
        mo.NCA(init=np.array([[1.0, 2], [3, 4], [5, 6]])).fit(X, y)
    mo.NCA(init=np.arange(9.0).reshape(3, 3), max_iter=20).fit(X, y)


@quiet
def test_n_components():
    X, y = np.arange(12.0).reshape(4, 3), np.array([1, 1, 2, 2])
    init = np.random.RandomState(42).rand(2, 3)
    with pytest.raises(ValueError, match="shape"):  # n_components=3 does not match init's 2 rows
        mo.NCA(init=init, n_components=3).fit(X, y)
    with pytest.raises(ValueError, match="n_components"):
        mo.NCA(init=init, n_components=5).fit(X, y)
    assert mo.NCA(n_components=2, init="identity", max_iter=20).fit(X, y).components_.shape == (2, 3)
    assert mo.NCA(init=init, max_iter=20).fit(X, y).components_.shape == (2, 3)  # n_components from init


@quiet
def test_init_transformation():
    rng = np.random.RandomState(42)
    X, y = make_blobs(n_samples=30, centers=6, n_features=5, random_state=0)
    for init in ["identity", "random", "auto", "pca", "lda", rng.rand(5, 5)]:
        assert mo.NCA(init=init, max_iter=50).fit(X, y).components_.shape == (5, 5)
    with pytest.raises(ValueError, match=re.escape("(5, 6)")):  # init's columns must match X's
        mo.NCA(init=rng.rand(5, 6)).fit(X, y)
    with pytest.raises(ValueError, match=re.escape("(6, 5)")):  # more rows than columns
        mo.NCA(init=rng.rand(6, 5)).fit(X, y)
    with pytest.raises(ValueError, match=re.escape("(5, 5)")):  # rows must match n_components
        mo.NCA(init=rng.rand(5, 5), n_components=3).fit(X, y)


@quiet
@pytest.mark.parametrize("n_samples, n_features, n_classes, n_components", [
    (11, 7, 5, 3),    # lda: 3 <= min(4, 7)
    (11, 11, 7, 5),   # lda (4 discriminant directions: a principal one fills in)
    (11, 7, 5, 5),    # pca: 5 > 4 and 5 < min(7, 11)
    (11, 5, 5, 5),    # identity: 5 == min(5, 11)
    (5, 11, 3, 5),    # identity: 5 == min(11, 5)
])
def test_auto_init(n_samples, n_features, n_classes, n_components):
    # scikit-learn runs the whole 4 x 4 x 3 x 4 grid; these cases cover each branch of the rule
    rng = np.random.RandomState(42)
    X = rng.randn(n_samples, n_features)
    y = np.tile(range(n_classes), n_samples // n_classes + 1)[:n_samples]
    base = mo.NCA(init="auto", n_components=n_components, max_iter=1, random_state=0)
    if n_components <= min(n_classes - 1, n_features):
        expected = "lda"
    elif n_components < min(n_features, n_samples):
        expected = "pca"
    else:
        expected = "identity"
    auto = clone(base).fit(X, y)
    other = clone(base).set_params(init=expected).fit(X, y)
    assert auto.restarts_[0]["start"] == expected
    np.testing.assert_array_almost_equal(auto.components_, other.components_)


@quiet
def test_warm_start_validation():
    X, y = make_classification(n_samples=30, n_features=5, n_classes=4, n_redundant=0, n_informative=5,
                               random_state=0)
    nca = mo.NCA(warm_start=True, max_iter=5).fit(X, y)
    X4, y4 = make_classification(n_samples=30, n_features=4, n_classes=4, n_redundant=0, n_informative=4,
                                 random_state=0)
    with pytest.raises(ValueError, match=re.escape(
            "The new inputs dimensionality (4) does not match the input dimensionality of the previously learned "
            "transformation (5).")):
        nca.fit(X4, y4)


@quiet
def test_warm_start_effectiveness():
    # one more iteration from the previous fit moves little; from a cold start it moves more
    moved = {}
    for warm in (True, False):
        nca = mo.NCA(warm_start=warm, random_state=0).fit(IRIS_X, IRIS_Y)
        first = nca.components_.copy()
        nca.set_params(max_iter=1).fit(IRIS_X, IRIS_Y)
        moved[warm] = np.sum(np.abs(nca.components_ - first))
    assert moved[True] < 3.0
    assert moved[False] > moved[True]


def _check_verbose_table(out, init_name):
    """scikit-learn's test_verbose claims on ``out``, with ``[NCA]`` for ``[NeighborhoodComponentsAnalysis]``."""
    msgs = {"pca": "Finding principal components", "lda": "Finding most discriminative components"}
    lines = re.split("\n+", out)
    if init_name in msgs:  # pca or lda: a line on the initialisation first
        assert re.match(msgs[init_name] + r"\.\.\. done in \ *\d+\.\d{2}s", lines[0])
        lines = lines[1:]
    assert lines[0] == "[NCA]"
    header = "{:>10} {:>20} {:>10}".format("Iteration", "Objective Value", "Time(s)")
    assert lines[1] == f"[NCA] {header}"
    assert lines[2] == f"[NCA] {'-' * len(header)}"
    for i, line in enumerate(lines[3:-2]):  # iterations 0 (the start), 1, 2, ...
        assert re.match(r"\[NCA\] *\d+ *\d\.\d{6}e[+|-]\d+\ *\d+\.\d{2}", line), line
        assert int(line.split()[1]) == i
    assert re.match(r"\[NCA\] Training took\ *\d+\.\d{2}s\.", lines[-2])
    assert lines[-1] == ""
    return lines


@quiet
@pytest.mark.parametrize("init_name", ["pca", "lda", "identity", "random", "precomputed"])
def test_verbose(init_name, capsys):
    rng = np.random.RandomState(42)
    X, y = make_blobs(n_samples=30, centers=6, n_features=5, random_state=0)
    init = rng.randn(X.shape[1], X.shape[1]) if init_name == "precomputed" else init_name
    nca = mo.NCA(verbose=1, init=init).fit(X, y)
    lines = _check_verbose_table(capsys.readouterr().out, init_name)
    assert len(lines) - 5 == nca.n_iter_ + 1  # a line per iteration and the start's
    value = float(lines[-3].split()[2])  # the objective maximised (f), as scikit-learn prints it
    assert value == pytest.approx(-nca.solution_.objective, rel=1e-6)


@quiet
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_verbose_on_either_path(backend, capsys):
    # the blobs above are separated from the start (no iteration); iris takes some
    nca = mo.NCA(verbose=1, init="identity", max_iter=12, backend=backend).fit(IRIS_X, IRIS_Y)
    lines = _check_verbose_table(capsys.readouterr().out, "identity")
    assert nca.solution_.backend == backend and len(lines) - 5 == nca.n_iter_ + 1 == 13
    assert float(lines[-3].split()[2]) == pytest.approx(-nca.solution_.objective, rel=1e-6)


def test_no_verbose(capsys):
    mo.NCA().fit(IRIS_X, IRIS_Y)
    assert capsys.readouterr().out == ""


@quiet
def test_singleton_class():
    X, y = IRIS_X.copy(), IRIS_Y.copy()
    (ones,) = np.where(y == 1)
    y[ones] = 2
    y[ones[0]] = 1  # class 1 has one point
    assert np.all(np.isfinite(mo.NCA(max_iter=30).fit(X, y).components_))
    (ones,), (twos,) = np.where(y == 1), np.where(y == 2)
    y[ones], y[twos] = 0, 0
    y[ones[0]], y[twos[0]] = 1, 2  # only class 0 has several points
    assert np.all(np.isfinite(mo.NCA(max_iter=30).fit(X, y).components_))
    keep = [np.where(y == c)[0][0] for c in (0, 1, 2)]  # only classes of one: f = 0 whatever A
    X3, y3 = X[keep], y[keep]
    np.testing.assert_array_equal(mo.NCA(init="identity", max_iter=30).fit(X3, y3).transform(X3), X3)


@pytest.mark.skip(reason="metricopt refuses a single class ('NCA needs at least two classes': a metric learned "
                         "from one class separates nothing); scikit-learn fits it and returns the init")
def test_one_class():
    pass  # pragma: no cover


@quiet
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_callback(backend, capsys):
    max_iter = 10
    maps = []

    def report(transformation, n_iter):
        assert transformation.shape == (IRIS_X.shape[1] ** 2,)
        maps.append(transformation.reshape(IRIS_X.shape[1], -1))
        print(f"{max_iter - n_iter} iterations remaining...")

    nca = mo.NCA(max_iter=max_iter, callback=report, verbose=1, backend=backend).fit(IRIS_X, IRIS_Y)
    assert f"{max_iter - 1} iterations remaining..." in capsys.readouterr().out
    assert len(maps) == max_iter  # the last one: the fitted map's metric
    np.testing.assert_allclose(maps[-1].T @ maps[-1], nca.components_.T @ nca.components_, rtol=1e-8, atol=1e-10)


@quiet
def test_expected_transformation_shape():
    seen = {}
    mo.NCA(max_iter=5, callback=lambda A, n_iter: seen.update(A=A)).fit(IRIS_X, IRIS_Y)
    assert seen["A"].size == IRIS_X.shape[1] ** 2
    seen.clear()
    mo.NCA(n_components=2, max_iter=5, callback=lambda A, n_iter: seen.update(A=A)).fit(IRIS_X, IRIS_Y)
    assert seen["A"].shape == (2 * IRIS_X.shape[1],)


def test_convergence_warning():
    with pytest.warns(ConvergenceWarning, match=re.escape("[NCA] NCA did not converge")):
        mo.NCA(max_iter=2, verbose=1).fit(IRIS_X, IRIS_Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        mo.NCA().fit(IRIS_X, IRIS_Y)  # converges: no warning


@quiet
@pytest.mark.parametrize("param, value", [("n_components", np.int32(3)), ("max_iter", np.int32(100)),
                                          ("tol", np.float32(0.0001))])
def test_parameters_valid_types(param, value):
    mo.NCA(**{param: value}).fit(IRIS_X, IRIS_Y)


@pytest.mark.parametrize("n_components", [None, 2])
def test_nca_feature_names_out(n_components):
    names = mo.NCA(n_components=n_components).fit(IRIS_X, IRIS_Y).get_feature_names_out()
    expected = np.array([f"nca{i}" for i in range(n_components or IRIS_X.shape[1])], dtype=object)
    np.testing.assert_array_equal(names, expected)


@pytest.mark.parametrize("make", [lambda: mo.LMNN(k=2), lambda: mo.MMC(), lambda: mo.NCA(n_components=2)])
def test_feature_names_out_every_linear_learner(make):
    est = make().fit(IRIS_X[::3], IRIS_Y[::3])
    prefix = type(est).__name__.lower()
    np.testing.assert_array_equal(est.get_feature_names_out(),
                                  [f"{prefix}{i}" for i in range(est.components_.shape[0])])
    assert est.get_feature_names_out().size == est.transform(IRIS_X[:2]).shape[1]
