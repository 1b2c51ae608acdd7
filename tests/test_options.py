"""One options object (issue 31, item 1): the shared solve options have one table (:mod:`metricopt.options`) that
both backends, the estimators and ``metricopt fit`` read, and the same meaning everywhere."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.backends import cvxpy_backend
from metricopt.backends.jax import backend as jax_backend
from metricopt.cli import build_parser, main
from metricopt.errors import InputError, UnknownOptionError
from metricopt import KernelLMNN, MultiMetricLMNN
from metricopt.estimators._params import SOLVE_CONSTRAINTS
from metricopt.estimators.base import solve_options
from metricopt.options import CLI_OPTIONS, ESTIMATOR_OPTIONS, SOLVE_OPTIONS, default, option

#: every estimator that solves through a backend with the shared options
SOLVING_ESTIMATORS = (mo.LMNN, mo.MMC, mo.POLA, mo.MLCC, KernelLMNN, MultiMetricLMNN)


@pytest.fixture(scope="module")
def iris30():
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.arange(c * 50, c * 50 + 10) for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


# ------------------------------------------------------------------ the table is the single source
@pytest.mark.parametrize("module", [cvxpy_backend, jax_backend], ids=["cvxpy", "jax"])
def test_backend_options_take_the_tables_defaults(module):
    fields = {f.name: f.default for f in dataclasses.fields(module.Options)}
    for entry in SOLVE_OPTIONS:
        if module.NAME in entry.defaults:
            assert entry.name in fields, (module.NAME, entry.name)
            assert fields[entry.name] == entry.defaults[module.NAME], (module.NAME, entry.name)
        else:
            assert entry.name not in fields, (module.NAME, entry.name)


def test_tol_has_one_default_on_both_backends():
    assert default("tol", "cvxpy") == default("tol", "jax") == 1e-6
    assert cvxpy_backend.DEFAULT_MAX_ITER == {"SCS": 100_000, "CLARABEL": 500}
    assert default("solver_tol", "cvxpy") == 1e-8


@pytest.mark.parametrize("cls", SOLVING_ESTIMATORS, ids=lambda c: c.__name__)
def test_estimators_take_the_shared_options_with_none_defaults(cls):
    params = inspect.signature(cls.__init__).parameters
    for name in ESTIMATOR_OPTIONS:
        assert name in params, (cls.__name__, name)
        assert params[name].default is (False if name == "verbose" else None), (cls.__name__, name)
        assert cls._parameter_constraints[name] == SOLVE_CONSTRAINTS[name]


def test_solve_options_pass_the_set_options_by_the_tables_names():
    est = mo.LMNN(tol=1e-3, solver_tol=1e-9, max_iter=7, time_limit=5.0, solver="SCS")
    assert solve_options(est) == {"verbose": False, "tol": 1e-3, "solver_tol": 1e-9, "max_iter": 7,
                                  "time_limit": 5.0, "solver": "SCS"}
    assert solve_options(mo.MMC()) == {"verbose": False}


def test_cli_fit_options_come_from_the_table():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    fit = sub.choices["fit"]
    by_flag = {s: a for a in fit._actions for s in a.option_strings}
    for name in CLI_OPTIONS:
        entry = option(name)
        action = by_flag[entry.flag]
        assert action.dest == name and action.type is entry.kind and action.default is None
        assert action.help == entry.meaning


# ------------------------------------------------------------------ tol: the certified gap on both backends
@pytest.mark.parametrize("backend", ["cvxpy", "jax"])
def test_tol_is_the_certified_relative_gap_on_both_backends(iris30, backend):
    X, y = iris30
    sol = mo.LMNNProblem(X, y, k=2).solve(backend=backend, tol=1e-3)
    assert sol.certificate is not None
    assert sol.certificate.tol == 1e-3
    assert sol.certificate.rel_gap <= 1e-3
    assert sol.is_optimal


def test_solver_tol_reaches_the_conic_solver(iris30, monkeypatch):
    X, y = iris30
    seen = []
    real = cvxpy_backend._solver_kwargs
    monkeypatch.setattr(cvxpy_backend, "_solver_kwargs", lambda solver, solver_tol, max_iter, timed=False:
                        seen.append(solver_tol) or real(solver, solver_tol, max_iter, timed))
    sol = mo.LMNNProblem(X, y, k=2).solve(solver="CLARABEL", tol=1e-4, solver_tol=1e-7)
    assert seen == [1e-7] and sol.stats["solver_tol"] == 1e-7
    assert sol.certificate.tol == 1e-4
    seen.clear()
    mo.LMNNProblem(X, y, k=2).solve(solver="CLARABEL", certify=False)
    assert seen == [1e-8]  # the table's default, whatever tol is


def test_solver_tol_is_refused_where_no_conic_solver_runs(iris30):
    X, y = iris30
    with pytest.raises(UnknownOptionError, match="solver_tol.*backend='cvxpy' only"):
        mo.LMNNProblem(X, y, k=2).solve(backend="jax", solver_tol=1e-9)
    with pytest.raises(UnknownOptionError, match="solver_tol"):
        mo.LMNN(k=2, backend="jax", solver_tol=1e-9).fit(X, y)


def test_certify_is_an_on_off_switch(iris30):
    X, y = iris30
    with pytest.raises(InputError, match=r"certificate's relative-gap tolerance is tol \(e.g. tol=1e-06\)"):
        mo.LMNNProblem(X, y, k=2).solve(certify=1e-6)
    sol = mo.LMNNProblem(X, y, k=2).solve(solver="CLARABEL", certify=False)
    assert sol.certificate is None


def test_an_estimators_tol_means_the_certified_gap_on_the_exact_backend(iris30):
    X, y = iris30
    est = mo.LMNN(k=2, solver="CLARABEL", tol=1e-3).fit(X, y)
    assert est.certificate_.tol == 1e-3 and est.certificate_.rel_gap <= 1e-3
    assert est.solution_.stats["solver_tol"] == 1e-8


# ------------------------------------------------------------------ nothing clamped
def test_lmnn_r_tol_and_max_iter_are_used_as_given(iris30, monkeypatch):
    from metricopt.methods.lmnn import lowrank

    seen = {}
    real = lowrank.lmnn_r

    def spy(problem, n_components, **kw):
        seen.update(kw)
        return real(problem, n_components, **kw)

    monkeypatch.setattr(lowrank, "lmnn_r", spy)
    X, y = iris30
    est = mo.LMNN(k=2, n_components=2, tol=1e-9, max_iter=3000).fit(X, y)
    assert seen["tol"] == 1e-9 and seen["max_iter"] == 3000
    assert est.solution_.stats["tol"] == 1e-9
    # honoured: stationary only at the asked threshold, else a limit, never optimal
    if est.solution_.status is mo.Status.STATIONARY:
        assert est.solution_.stats["stationarity"] <= 1e-9 or est.solution_.stats["rel_gap_to_convex_bound"] <= 1e-9
    assert not est.solution_.is_optimal


def test_lmnn_r_refuses_solver_tol(iris30):
    X, y = iris30
    with pytest.raises(InputError, match="solver_tol is the exact backend's conic accuracy"):
        mo.LMNN(k=2, n_components=2, solver_tol=1e-9).fit(X, y)


# ------------------------------------------------------------------ time_limit on every path
@pytest.mark.parametrize("make", [
    lambda: mo.LMNN(k=2, time_limit=60.0),
    lambda: mo.LMNN(k=2, backend="jax", time_limit=60.0),
    lambda: mo.LMNN(k=2, passes=2, time_limit=60.0),
    lambda: mo.LMNN(k=2, n_components=2, time_limit=60.0),
    lambda: mo.MMC(time_limit=60.0),
    lambda: mo.POLA(time_limit=60.0),
    lambda: mo.MLCC(time_limit=60.0),
    lambda: KernelLMNN(k=2, time_limit=60.0),
    lambda: MultiMetricLMNN(k=2, time_limit=60.0),
    lambda: MultiMetricLMNN(k=2, init="single", time_limit=60.0),
    lambda: mo.GerrymanderingKNN(k=2, max_iter=2, time_limit=60.0),
], ids=["lmnn", "lmnn-jax", "lmnn-passes", "lmnn-r", "mmc", "pola", "mlcc", "kernel", "multimetric",
        "multimetric-single", "gerrymander"])
def test_time_limit_is_accepted_by_every_estimator(iris30, make, monkeypatch):
    from metricopt.estimators import base

    X, y = iris30
    est = make()
    assert est.get_params()["time_limit"] == 60.0
    seen = []
    real = base.solve
    monkeypatch.setattr(base, "solve", lambda problem, backend, **o: seen.append(o) or real(problem, backend, **o))
    est.fit(X, y)
    assert est.solution_.M is not None
    assert all(o.get("time_limit") == 60.0 for o in seen)


def test_time_limit_is_refused_when_not_positive(iris30):
    X, y = iris30
    with pytest.raises(InputError, match="time_limit must be > 0.0"):
        mo.MMC(time_limit=0.0).fit(X, y)


def test_cli_fit_takes_time_limit_and_solver_tol_with_the_exact_backend(tmp_path, capsys):
    out = tmp_path / "m.npz"
    code = main(["fit", "--method", "lmnn", "--data", "iris", "--backend", "cvxpy", "--time-limit", "60",
                 "--tol", "1e-4", "--solver-tol", "1e-7", "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "certificate" in text and "tol 1.0e-04" in text


def test_cli_refuses_solver_tol_without_a_conic_solver(tmp_path, capsys):
    code = main(["fit", "--method", "lmnn", "--data", "iris", "--backend", "jax", "--solver-tol", "1e-7",
                 "--out", str(tmp_path / "m.npz")])
    assert code == 2
    assert "--solver-tol is the exact backend's conic solver accuracy" in capsys.readouterr().err


# ------------------------------------------------------------------ model files written before the shared options
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_model_file_from_before_reads_its_exact_backend_tol_as_solver_tol():
    import pathlib

    from metricopt.io import load_model

    models = pathlib.Path(__file__).parent / "data" / "models"
    old = load_model(models / "mmc.npz")  # written with tol=1e-8, the conic solver's accuracy then
    assert old.get_params()["solver_tol"] == 1e-8 and old.get_params()["tol"] is None
    low_rank = load_model(models / "lmnn_lowrank_s.npz")  # low rank: tol was the stationarity threshold, as today
    assert low_rank.get_params()["tol"] == 1e-8 and low_rank.get_params()["solver_tol"] is None
