"""``import metricopt`` is cheap: it loads neither JAX, CVXPY, scikit-learn nor SciPy, and every public name
still resolves, lazily (issue 30, item 4). Each check runs in a fresh interpreter, since the test session
has long imported everything."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("jax", "jaxlib", "cvxpy", "sklearn", "scipy")


def _run(code):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_metricopt_loads_no_heavy_dependency():
    loaded = _run(f"""
        import json, sys
        import metricopt
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
    """)
    assert loaded == []


def test_every_public_name_resolves_and_the_solver_stack_loads_on_demand():
    got = _run(f"""
        import json, sys, types
        import metricopt
        before = [m for m in {HEAVY!r} if m in sys.modules]
        problem = metricopt.LMNNProblem
        after = "cvxpy" in sys.modules
        missing = [n for n in metricopt.__all__ if getattr(metricopt, n, None) is None]
        star = {{}}
        exec("from metricopt import *", star)
        print(json.dumps({{
            "before": before, "cvxpy_after": after, "missing": missing,
            "star_missing": sorted(set(metricopt.__all__) - set(star)),
            "not_in_dir": sorted(set(metricopt.__all__) - set(dir(metricopt))),
            "problem": problem.__module__.startswith("metricopt.methods.lmnn."),
            "certify_is_function": isinstance(metricopt.certify, types.FunctionType),
        }}))
    """)
    # a problem class needs no CVXPY until a conic program is built (metricopt._lazy)
    assert got == {"before": [], "cvxpy_after": False, "missing": [], "star_missing": [], "not_in_dir": [],
                   "problem": True, "certify_is_function": True}


def test_submodules_are_attributes_and_certify_stays_the_function():
    got = _run("""
        import importlib, json, types
        import metricopt as mo
        importlib.import_module("metricopt.certify.triplets")  # loads the certify package before mo.certify is read
        print(json.dumps({
            "certify": isinstance(mo.certify, types.FunctionType),
            "submodules": [callable(mo.io.save_model), isinstance(mo.terms.Frobenius, type),
                           isinstance(mo.datasets, types.ModuleType), isinstance(mo.linalg, types.ModuleType),
                           isinstance(mo.backends, types.ModuleType)],
            "unknown": hasattr(mo, "no_such_name"),
        }))
    """)
    assert got == {"certify": True, "submodules": [True] * 5, "unknown": False}


def test_problem_methods_work_without_touching_metricopt_solve():
    """``problem.solve`` needs :mod:`metricopt.solving`, which ``import metricopt`` no longer loads eagerly."""
    got = _run("""
        import json
        import numpy as np
        from metricopt.methods.lmnn import LMNNProblem

        X = np.random.default_rng(0).normal(size=(20, 3))
        p = LMNNProblem(X, np.arange(20) % 2, k=2)
        sol = p.solve()
        print(json.dumps([sol.status.code, p.certify(sol.M).rel_gap is not None]))
    """)
    assert got[1] is True


def test_a_numpy_nca_fit_loads_neither_jax_nor_cvxpy():
    """NCA's default path on a CPU (NumPy L-BFGS) needs no conic program and no JAX: the problem layer imports
    CVXPY on first use (:mod:`metricopt._lazy`) and the status policy does not import the certifiers."""
    got = _run("""
        import json, sys
        import numpy as np
        import metricopt as mo

        X = np.random.default_rng(0).normal(size=(30, 3))
        est = mo.NCA().fit(X, np.arange(30) % 3)
        print(json.dumps([est.solution_.backend, est.solution_.status.code, "jax" in sys.modules,
                          "cvxpy" in sys.modules]))
    """)
    assert got == ["numpy", "stationary", False, False]
