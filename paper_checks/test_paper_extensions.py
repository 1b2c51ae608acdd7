r"""Paper check: multi-pass and multi-metric LMNN (JMLR 2009, Sections 5.1 and 5.2).

Next to single-pass LMNN, on the same random stratified 70/30 splits as
``test_paper_uci.py`` (``datasets.random_splits(y, test_size=0.3, seed=0)``: the first ``n``
splits here are the first ``n`` there), for iris (raw features), wine (z-scored on the
training part) and balance scale (625 samples):

* **multi-pass LMNN** (Section 5.1; :func:`metricopt.multipass_lmnn`, ``passes=2``): LMNN
  re-solved with the target neighbours re-picked under the first pass's metric, the maps
  composed. Pass 1 *is* single-pass LMNN (same program, same data), so the one-pass row is
  read off pass 1 of the same run: the comparison is exactly paired.
* **multi-metric LMNN** (Section 5.2; :class:`metricopt.MultiMetricLMNNProblem`,
  ``clusters="labels"``): one metric per class, learned jointly in one convex program

  .. math::

      \min_{M^1..M^C \succeq 0} (1-\mu)\sum_{i, j \rightsquigarrow i} D(x_i, x_j)
      + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + D(x_i, x_j) - D(x_i, x_l)]_+,
      \quad D(x_i, x_j) = (x_i - x_j)^\top M^{y_j} (x_i - x_j),

  classified by the kNN rule under :math:`D` (the metric of each training point's class).

``k = 3``, ``mu = 0.5``, exact backend (CVXPY/SCS); every convex solve (each pass; the
joint multi-metric program) is certified by its duality gap.

Tolerances (fixed before the runs):

* every solve: status ``optimal`` with certified relative gap ``<= 1e-6``;
* 2-pass LMNN kNN error not significantly above 1-pass LMNN kNN error, and multi-metric kNN
  error not significantly above single-metric LMNN kNN error (paired mean difference
  ``<= 2`` standard errors);
* wine and balance: 2-pass and multi-metric LMNN kNN errors significantly below Euclidean kNN
  (paired mean difference ``< -2`` standard errors). These are the assertions that fail when
  every metric is the identity (``METRICOPT_PAPER_IDENTITY=1``); the "not worse" ones cannot.
  They were added (issue 16) after a run of this check had measured -3.0 / -4.1 pp (wine) and
  -7.0 / -7.0 pp (balance); the paper's own multi-pass and multi-metric figures are not at hand.

kNN errors use the tie-inclusive rule of every paper check (``_common.TIES``), the multi-metric
rule included.

Number of splits (default 20 for iris and balance, 5 for wine, where one multi-metric
solve on 124 x 13 standardized points took 92 s on a shared core, so that the check runs in
about a quarter of an hour on one thread): ``--paper-splits N`` sets all,
``METRICOPT_PAPER_SPLITS_EXTENSIONS_IRIS`` / ``_EXTENSIONS_WINE`` /
``_EXTENSIONS_BALANCE_SCALE`` one set's.
"""

import time

import numpy as np
import pytest

import _common as C
import metricopt
from metricopt import datasets
from metricopt.energy import energy_predict
from metricopt.errors import SolverError

pytestmark = pytest.mark.slow

EXACT = {"backend": "cvxpy"}
GAP_TOL = 1e-6  # as in test_paper_uci.py
PASSES = 2

#: (split-count name, data set, scaling, label, default number of splits)
SETS = [
    ("extensions-iris", "iris", None, "raw features", 20),
    ("extensions-wine", "wine", "standard", "standardized", 5),
    ("extensions-balance-scale", "balance-scale", None, "625 samples (UCI)", 20),
]

#: data sets on which the gain over Euclidean kNN is asserted (iris: the paper's LMNN and Euclidean errors
#: differ by 0.5 pp, below what 20 splits resolve)
GAIN_SETS = ("wine", "balance-scale")

V_ONE = "LMNN (1 pass), same splits"
V_TWO = f"LMNN ({PASSES} passes)"
V_MM = "multi-metric LMNN (one metric per class)"


def _failed(status, t, ntr, nte, d, message):
    nan = float("nan")
    return C.SplitResult({m: nan for m in C.METHODS}, status, float("inf"), "none", t, ntr, nte, d,
                         {"message": message})


def _split(Xtr, ytr, Xte, yte):
    """One split: 1-pass, 2-pass and multi-metric LMNN; a :class:`_common.SplitResult` for each."""
    ntr, nte, d = len(ytr), len(yte), Xtr.shape[1]
    euclid = metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, ties=C.TIES)
    out = {}
    if C.IDENTITY:  # the check of the check: every metric is the identity, nothing is solved
        targets = metricopt.LMNNProblem(Xtr, ytr, k=C.K, mu=C.MU).target_neighbors
        energy = float(np.mean(energy_predict(Xtr, ytr, Xte, k=C.K, mu=C.MU, M=np.eye(d),
                                              train_targets=targets) != yte))
        for v, e, eu in ((V_ONE, energy, euclid), (V_TWO, energy, euclid), (V_MM, float("nan"), euclid)):
            out[v] = C.SplitResult({"euclidean": eu, "lmnn": eu, "energy": e}, "identity", float("inf"),
                                   "none", 0.0, ntr, nte, d, {"pass_statuses": ["identity"] * PASSES}
                                   if v == V_TWO else {})
        return out
    # ---- multi-pass (pass 1 = single-pass LMNN)
    t0 = time.perf_counter()
    try:
        mp = metricopt.multipass_lmnn(Xtr, ytr, passes=PASSES, k=C.K, mu=C.MU, **EXACT)
    except SolverError as exc:
        t = time.perf_counter() - t0
        out[V_ONE] = out[V_TWO] = _failed("no metric", t, ntr, nte, d, str(exc))
    else:
        one, p1 = mp.solutions[0], mp.problems[0]
        e1 = {
            "euclidean": euclid,
            "lmnn": metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, M=one.M, ties=C.TIES),
            "energy": float(np.mean(energy_predict(Xtr, ytr, Xte, k=C.K, mu=C.MU, M=one.M,
                                                   train_targets=p1.target_neighbors) != yte)),
        }
        out[V_ONE] = C.SplitResult({m: float(v) for m, v in e1.items()}, str(one.status),
                                   float(one.certificate.rel_gap), one.certificate.verdict, mp.times[0],
                                   ntr, nte, d)
        e2 = {
            "euclidean": euclid,
            "lmnn": metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, L=mp.L, ties=C.TIES),
            "energy": float(np.mean(energy_predict(Xtr, ytr, Xte, k=C.K, mu=C.MU, L=mp.L,
                                                   train_targets=mp.target_neighbors) != yte)),
        }
        statuses = [str(s.status) for s in mp.solutions]
        gaps = [float(s.certificate.rel_gap) for s in mp.solutions]
        worst = next((st for st in statuses if st != "optimal"), "optimal")
        out[V_TWO] = C.SplitResult({m: float(v) for m, v in e2.items()}, worst, max(gaps),
                                   "/".join(s.certificate.verdict for s in mp.solutions), sum(mp.times),
                                   ntr, nte, d,
                                   {"pass_statuses": statuses, "pass_rel_gaps": gaps, "pass_times": mp.times,
                                    "rank": int(mp.L.shape[0])})
    # ---- multi-metric (one metric per class, joint program)
    t0 = time.perf_counter()
    prob = metricopt.MultiMetricLMNNProblem(Xtr, ytr, clusters="labels", k=C.K, mu=C.MU)
    sol = prob.solve(**EXACT)
    t = time.perf_counter() - t0
    if sol.M is None:
        out[V_MM] = _failed(str(sol.status), t, ntr, nte, d, sol.message)
    else:
        e3 = {"euclidean": euclid,
              "lmnn": float(np.mean(prob.knn_predict(Xte, sol.M, ties=C.TIES) != yte)),
              "energy": float("nan")}  # the energy rule is not defined for several metrics here
        cert = sol.certificate
        out[V_MM] = C.SplitResult(e3, str(sol.status), float(cert.rel_gap) if cert is not None else float("inf"),
                                  cert.verdict if cert is not None else "none", t, ntr, nte, d,
                                  {"n_metrics": int(prob.n_clusters)})
    return out


def _paired(a, b, method="lmnn", method_b=None):
    """Mean and s.e. (pp) of the per-split difference of ``a``'s ``method`` error and ``b``'s ``method_b``
    error (default: the same method)."""
    mean, se = C.mean_se([100 * (ra.errors[method] - rb.errors[method_b or method]) for ra, rb in zip(a, b)])
    return {"mean": mean, "se": se}


def test_extensions():
    t0 = time.perf_counter()
    rows, checks, notes = [], [], []
    for check, name, scale, label, default in SETS:
        X, y = datasets.load(name)
        n = C.n_splits(check, default)
        res = {V_ONE: [], V_TWO: [], V_MM: []}
        for s, (train, test) in enumerate(datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)):
            Xtr, Xte = datasets.preprocess(X[train], X[test], scale=scale, pca=None)
            r = _split(Xtr, y[train], Xte, y[test])
            for v in res:
                res[v].append(r[v])
            print(f"  [{name}/{scale or 'raw'}] split {s + 1}: euclid {100 * r[V_ONE].errors['euclidean']:.2f}%  "
                  f"1-pass {100 * r[V_ONE].errors['lmnn']:.2f}%  2-pass {100 * r[V_TWO].errors['lmnn']:.2f}%  "
                  f"multi-metric {100 * r[V_MM].errors['lmnn']:.2f}%  "
                  f"passes {r[V_TWO].extra.get('pass_statuses')} gaps "
                  f"{[f'{g:.1e}' for g in r[V_TWO].extra.get('pass_rel_gaps', [])]} ({r[V_TWO].solve_time:.1f}s)  "
                  f"multi-metric {r[V_MM].status} gap {r[V_MM].rel_gap:.1e} ({r[V_MM].solve_time:.1f}s)", flush=True)
        ntr, nte = res[V_ONE][0].n_train, res[V_ONE][0].n_test
        protocol = f"random stratified 70/30 splits ({ntr}/{nte}), seed 0 as test_paper_uci.py"
        prep = "z-score fitted on the training part" if scale else "none"
        row1 = C.make_row(name, V_ONE, None, protocol, prep, "cvxpy/SCS, exact, certified (pass 1 of the 2-pass run)",
                          res[V_ONE])
        row2 = C.make_row(name, V_TWO, None, protocol, prep,
                          f"cvxpy/SCS, exact, {PASSES} certified solves per split", res[V_TWO])
        row3 = C.make_row(name, V_MM, None, protocol, prep, "cvxpy/SCS, exact joint program, certified", res[V_MM])
        # the 2-pass row counts the statuses of every pass's solve, not one per split
        all_st = {}
        for r in res[V_TWO]:
            for st in r.extra.get("pass_statuses", [r.status]):
                all_st[st] = all_st.get(st, 0) + 1
        row2["summary"]["certificates"]["statuses"] = all_st
        row2["summary"]["certificates"]["solves"] = sum(all_st.values())
        d2 = _paired(res[V_TWO], res[V_ONE])
        d2e = _paired(res[V_TWO], res[V_ONE], "energy")
        d3 = _paired(res[V_MM], res[V_ONE])
        row2["comparisons"] = [{"label": "2-pass - 1-pass LMNN, kNN", **d2},
                               {"label": "2-pass - 1-pass LMNN, energy rule", **d2e}]
        row3["comparisons"] = [{"label": "multi-metric - single-metric LMNN, kNN", **d3}]
        rows += [row1, row2, row3]
        checks += [
            C.assert_certified(row2["summary"], res[V_TWO], GAP_TOL, name=f"{name}: {V_TWO}, every pass"),
            C.assert_certified(row3["summary"], res[V_MM], GAP_TOL, name=f"{name}: {V_MM}, joint program"),
            C.assert_not_worse({"two_pass-one_pass": d2}, "two_pass", "one_pass",
                               f"{name}: 2-pass LMNN kNN not significantly worse than 1-pass LMNN kNN"),
            C.assert_not_worse({"multi_metric-single_metric": d3}, "multi_metric", "single_metric",
                               f"{name}: multi-metric LMNN kNN not significantly worse than single-metric LMNN kNN"),
        ]
        if name in GAIN_SETS:  # the effect itself, which fails when the metrics are the identity
            for v, short in ((V_TWO, "2-pass"), (V_MM, "multi-metric")):
                g = _paired(res[v], res[v], "lmnn", "euclidean")  # same split, same tie rule
                checks.append(C.assert_gain({"lmnn-euclidean": g}, "lmnn", "euclidean",
                                            f"{name}: {short} LMNN kNN significantly below Euclidean kNN"))
        ranks = [r.extra["rank"] for r in res[V_TWO] if "rank" in r.extra]
        notes.append(
            f"{name}: {n} splits (default {default}); 2-pass LMNN vs 1 pass {d2['mean']:+.2f} pp (s.e. {d2['se']:.2f}) "
            f"kNN and {d2e['mean']:+.2f} pp (s.e. {d2e['se']:.2f}) energy rule; multi-metric vs single metric "
            f"{d3['mean']:+.2f} pp (s.e. {d3['se']:.2f}) kNN. Rank of the composed 2-pass map: "
            + (f"{min(ranks)}..{max(ranks)} of {res[V_ONE][0].dim}" if ranks else "-")
            + f". Mean seconds per split: 2-pass run {row2['summary']['solve_time']['mean']:.1f} "
            f"(both passes), multi-metric {row3['summary']['solve_time']['mean']:.1f}.")
    notes += [
        "Paper numbers: none entered. JMLR 2009 (Sections 5.1, 5.2 and the results of Section 6) reports "
        "multi-pass and multi-metric LMNN results with small gains; we did not have the paper's figures for "
        "these variants on iris, wine and balance at hand to verify, so the paper columns are empty; asserted are "
        "the paired comparisons with single-pass / single-metric LMNN and (wine, balance) with Euclidean kNN on "
        "the same splits.",
        "The one-pass row is pass 1 of the 2-pass run (the same convex program on the same data as "
        "test_paper_uci.py's LMNN solve), so it is certified by the 2-pass row's 'every pass' assertion. "
        "The first n splits are those of test_paper_uci.py (same seed), which uses 100 (iris, balance, "
        "wine standardized) -- fewer here because the multi-metric program is larger (C x d = 3 x d); wine "
        "has only 5 by default (one multi-metric solve took ~1.5 min on a shared core), so its comparisons "
        "are coarse.",
        "Wine is standardized here (the test_paper_uci.py 'standardized' row): the unscaled features make the "
        "conic programs badly scaled (see the wine check), and the multi-metric program is 3x larger.",
        "The 2-pass row's statuses count every pass's solve (2 per split); the certificate of pass p is that "
        "of pass p's own convex program (the composition of the passes minimises no single objective). "
        "Multi-metric: one joint program per split (3 metrics), energy rule not evaluated ('-').",
    ]
    C.finish("extensions", "Multi-pass and multi-metric LMNN (JMLR 2009 Sections 5.1, 5.2)", rows, checks, notes, t0)
