r"""Paper check: multi-pass and multi-metric LMNN (JMLR 2009, Sections 5.1 and 5.2; Table 1's rows
"LMNN (multiple passes)" and "LMNN (multiple metrics)").

Next to single-pass LMNN, on random stratified 70/30 splits of the full UCI sets
(``datasets.random_splits(y, test_size=0.3, seed=0)``; not the paper-size subsamples of
``test_paper_uci.py``), for iris (raw features), wine (z-scored on the training part) and balance
scale (625 samples):

* **multi-pass LMNN** (Section 5.1; :func:`metricopt.multipass_lmnn`, ``passes=2``): LMNN
  re-solved with the target neighbours re-picked under the first pass's metric, the maps
  composed. Pass 1 *is* single-pass LMNN (same program, same data), so the one-pass row is
  read off pass 1 of the same run: the comparison is exactly paired. The paper does not give its
  number of passes.
* **multi-metric LMNN** (Section 5.2; :class:`metricopt.MultiMetricLMNNProblem`,
  ``clusters="labels"``): one metric per class, learned jointly in one convex program

  .. math::

      \min_{M^1..M^C \succeq 0} (1-\mu)\sum_{i, j \rightsquigarrow i} D(x_i, x_j)
      + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + D(x_i, x_j) - D(x_i, x_l)]_+,
      \quad D(x_i, x_j) = (x_i - x_j)^\top M^{y_j} (x_i - x_j),

  classified by the kNN rule under :math:`D` (the metric of each training point's class). The
  paper held out a validation part of each training set and started from the single-metric
  solution; the exact solve here needs neither and trains on the whole training part.

``k = 3``, ``mu = 0.5``, exact backend (CVXPY/SCS); every convex solve (each pass; the
joint multi-metric program) is certified by its duality gap.

Tolerances (fixed before the runs):

* every solve: status ``optimal`` with certified relative gap ``<= 1e-6``;
* the paper's directions against single-pass LMNN (JMLR 2009 Table 1, rows "LMNN (multiple
  passes)" and "LMNN (multiple metrics)" against "LMNN PCA"): where the paper's variant is below,
  ours not significantly above (paired mean difference ``<= 2`` standard errors); where it is above
  (multi-metric on iris), ours not significantly below; where the two print the same number
  (multi-metric on wine), nothing;
* wine and balance: 2-pass and multi-metric LMNN kNN errors significantly below Euclidean kNN
  (paired mean difference ``< -2`` standard errors; Table 1 has both far below). These are the
  assertions that fail when every metric is the identity (``METRICOPT_PAPER_IDENTITY=1``); the
  others cannot. They were added (issue 16) after a run of this check had measured -3.0 / -4.1 pp
  (wine) and -7.0 / -7.0 pp (balance).

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
from metricopt.methods.lmnn.energy import energy_predict
from metricopt.errors import SolverError

pytestmark = pytest.mark.slow

EXACT = {"backend": "cvxpy"}
GAP_TOL = 1e-6  # as in test_paper_uci.py
PASSES = 2

#: each data set's column of JMLR 2009 Table 1
COLUMN = {"iris": "iris", "wine": "wine", "balance-scale": "bal"}
#: the variants' rows of Table 1
ROW_MP, ROW_MM, ROW_ONE = "LMNN (multiple passes)", "LMNN (multiple metrics)", "LMNN PCA"

#: (split-count name, data set, scaling, label, default number of splits)
SETS = [
    ("extensions-iris", "iris", None, "raw features", 20),
    ("extensions-wine", "wine", "standard", "standardized", 5),
    ("extensions-balance-scale", "balance-scale", None, "625 samples (UCI)", 20),
]

#: data sets on which the gain over Euclidean kNN is asserted (iris: the paper's variants and its Euclidean error
#: differ by well under 1 pp, below what 20 splits resolve)
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
        protocol = f"random stratified 70/30 splits ({ntr}/{nte}) of the full set, seed 0"
        prep = "z-score fitted on the training part" if scale else "none"
        row1 = C.make_row(name, V_ONE, None, protocol, prep, "cvxpy/SCS, exact, certified (pass 1 of the 2-pass run)",
                          res[V_ONE])
        row2 = C.make_row(name, V_TWO, None, protocol, prep,
                          f"cvxpy/SCS, exact, {PASSES} certified solves per split", res[V_TWO])
        row3 = C.make_row(name, V_MM, None, protocol, prep, "cvxpy/SCS, exact joint program, certified", res[V_MM])
        C.count_pass_statuses(row2, res[V_TWO])  # the 2-pass row counts every pass's solve, not one per split
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
        ]
        one = C.jmlr(ROW_ONE, COLUMN[name])
        for d, row, key, short, label in ((d2, ROW_MP, "two_pass-one_pass", "2-pass", "1-pass"),
                                          (d3, ROW_MM, "multi_metric-single_metric", "multi-metric", "single-metric")):
            a, b = key.split("-")
            paper = C.jmlr(row, COLUMN[name])
            direction = C.direction(paper, one)
            if direction == "below":
                checks.append(C.assert_not_worse({key: d}, a, b, f"{name}: {short} LMNN kNN not significantly worse "
                                                 f"than {label} LMNN kNN"))
            elif direction == "above":
                checks.append(C.assert_not_below({key: d}, a, b, C.not_below_what(
                    name, f"{short} LMNN kNN", f"{label} LMNN kNN", paper - one)))
        if name in GAIN_SETS:  # the effect itself, which fails when the metrics are the identity
            for v, short, row in ((V_TWO, "2-pass", ROW_MP), (V_MM, "multi-metric", ROW_MM)):
                assert C.direction(C.jmlr(row, COLUMN[name]), C.jmlr("kNN Euclidean", COLUMN[name])) == "below"
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
    paper_rows = "; ".join(
        f"{name}: 1 pass {C.jmlr(ROW_ONE, col):.2f} %, multiple passes {C.jmlr(ROW_MP, col):.2f} %, multiple metrics "
        f"{C.jmlr(ROW_MM, col):.2f} %, Euclidean {C.jmlr('kNN Euclidean', col):.2f} %" for name, col in COLUMN.items())
    notes += [
        f"Paper (JMLR 2009 Table 1, on its subsets of the sets, {C.PAPER_PROTOCOL['iris']['splits']} splits, wine "
        f"unscaled): {paper_rows}. Asserted are the paper's directions of the variants against single-pass LMNN, "
        "and (wine, balance) the gains over Euclidean kNN on the same splits; our errors are not compared with "
        "the paper's (other data sizes and splits, wine z-scored).",
        "The one-pass row is pass 1 of the 2-pass run (the same convex program as test_paper_uci.py's LMNN "
        "solve, on other splits: the full sets here, the paper's subsample sizes there), so it is certified by "
        "the 2-pass row's 'every pass' assertion. Fewer splits than the paper's because the multi-metric "
        "program is larger (C x d = 3 x d); wine has only 5 by default (one multi-metric solve took ~1.5 min "
        "on a shared core), so its comparisons are coarse.",
        "Wine is standardized here (the test_paper_uci.py 'standardized' row): the unscaled features make the "
        "conic programs badly scaled (see the wine check), and the multi-metric program is 3x larger.",
        "The 2-pass row's statuses count every pass's solve (2 per split); the certificate of pass p is that "
        "of pass p's own convex program (the composition of the passes minimises no single objective). "
        "Multi-metric: one joint program per split (3 metrics), energy rule not evaluated ('-').",
    ]
    C.finish("extensions", "Multi-pass and multi-metric LMNN (JMLR 2009 Sections 5.1, 5.2)", rows, checks, notes, t0)


# ----------------------------------------------------------------------------- Olivetti faces (Table 1, oFaces)

#: the paper's Olivetti protocol (JMLR 2009 Sec. 4.2 and Table 1), as in test_paper_faces.py
FACE_HEIGHT, FACE_WIDTH = (int(C.jmlr_text("Sec. 4.2", "Olivetti faces", f"image {w} (pixels)")) for w in ("height", "width"))
FACE_EIGENFACES = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "eigenfaces"))
FACE_TRAIN = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "training images per subject"))
FACE_VALIDATION = C.jmlr("% validation", "oFaces")
FACE_PAPER_SPLITS = int(C.jmlr("# of train/test splits", "oFaces"))
#: our splits (about 7 s a split, 10 minutes on one core; ``METRICOPT_PAPER_SPLITS_EXTENSIONS_FACES``) and the early
#: stop's patience
FACE_SPLITS = 80
FACE_PATIENCE = 10


def _faces_split(Xtr, ytr, Xte, yte, fit):
    """One Olivetti split: 1-pass and 2-pass LMNN, each pass stopped early on the validation part
    (``fit``: :func:`_common.early_stopped_fit`); pass 2 re-picks the target neighbours under pass 1's map."""
    from metricopt.linalg import factor
    from metricopt.methods.lmnn.multipass import RANK_TOL

    ntr, nte, d = len(ytr), len(yte), Xtr.shape[1]
    euclid = metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, ties=C.TIES)
    L, out, statuses, gaps, times = np.eye(d), {}, [], [], []
    for p in range(PASSES):
        t0 = time.perf_counter()
        Z = Xtr @ L.T
        M = np.eye(Z.shape[1]) if C.IDENTITY else None
        status, gap = "identity", float("inf")
        if M is None:
            M, status, gap, _ = fit(Z, ytr)
        Lp = factor(M)
        spread = np.sum(((Z - Z.mean(axis=0)) @ Lp.T) ** 2, axis=0)
        Lp = Lp[spread > RANK_TOL * max(float(spread.max(initial=0.0)), 1e-300)]
        L = Lp @ L
        statuses.append(status)
        gaps.append(gap)
        times.append(time.perf_counter() - t0)
        targets = metricopt.LMNNProblem(Z, ytr, k=C.K, mu=C.MU).target_neighbors
        errors = {"euclidean": euclid,
                  "lmnn": metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, L=L, ties=C.TIES),
                  "energy": float(np.mean(energy_predict(Xtr, ytr, Xte, k=C.K, mu=C.MU, L=L,
                                                         train_targets=targets) != yte))}
        out[V_ONE if p == 0 else V_TWO] = C.SplitResult(
            {m: float(v) for m, v in errors.items()}, status if p == 0 else "/".join(statuses), max(gaps), "none",
            sum(times), ntr, nte, d, {"pass_statuses": list(statuses), "pass_rel_gaps": list(gaps),
                                      "pass_times": list(times), "rank": int(L.shape[0])})
    return out


def test_extensions_faces():
    """Multi-pass LMNN on the Olivetti faces with the paper's protocol (Table 1, oFaces; JMLR 2009 Sec. 5.1).

    The images, eigenfaces, splits and validation of ``test_paper_faces.py`` (38x31 pixels, 200 eigenfaces fitted
    on the training images, 7 training images per subject, 30 % validation with early stopping, the paper's 100
    splits; 80 here); each of the 2 passes is stopped early on the same validation part, pass 2 on the training images
    mapped by pass 1 with its target neighbours re-picked there (the composition of
    :func:`metricopt.multipass_lmnn`). Pass 1 is the 1-pass row (the same fit as the faces check's first row).

    Multi-metric LMNN is not run: one split's joint program (40 classes x 200 x 200) on the JAX backend ran past
    its 150 s time limit to 5.5 minutes and 8 GB before it was stopped (certificate not reached).

    Asserted: the paper's direction of 2-pass against 1-pass LMNN (Table 1, oFaces: the multiple-passes row above
    the LMNN PCA row, so not significantly below, paired, ``>= -2`` s.e.), and the 2-pass and 1-pass kNN errors
    consistent with the paper's (2 s.e. of the difference of the two means, as in the faces check); the bands fail
    when the metrics are the identity (our Euclidean error after PCA is about 10 %).
    """
    t0 = time.perf_counter()
    X64, y = datasets.load("olivetti")
    X = C.area_downsample(X64, (64, 64), (FACE_HEIGHT, FACE_WIDTH)) / 255.0
    n = C.n_splits("extensions-faces", FACE_SPLITS)
    fit = C.early_stopped_fit(FACE_VALIDATION / 100.0, FACE_PATIENCE)
    res = {V_ONE: [], V_TWO: []}
    for s, (train, test) in enumerate(datasets.per_class_splits(y, n_train=FACE_TRAIN, n_splits=n, seed=0)):
        from sklearn.decomposition import PCA

        pca = PCA(n_components=FACE_EIGENFACES, random_state=0).fit(X[train])
        r = _faces_split(pca.transform(X[train]), y[train], pca.transform(X[test]), y[test], fit)
        for v in res:
            res[v].append(r[v])
        print(f"  [faces] split {s + 1}: euclid {100 * r[V_ONE].errors['euclidean']:.2f}%  "
              f"1-pass {100 * r[V_ONE].errors['lmnn']:.2f}%  2-pass {100 * r[V_TWO].errors['lmnn']:.2f}%  "
              f"passes {r[V_TWO].extra['pass_statuses']} rank {r[V_TWO].extra['rank']} "
              f"({r[V_TWO].solve_time:.1f}s)", flush=True)
    protocol = (f"{FACE_TRAIN} random images per subject for training, the rest for testing; "
                f"{FACE_VALIDATION:.0f} % of the training images for validation")
    prep = (f"Olivetti 64x64 area-averaged to {FACE_HEIGHT}x{FACE_WIDTH}, pixels / 255, PCA to {FACE_EIGENFACES} "
            "eigenfaces fitted on the training images")
    row1 = C.make_row("faces", V_ONE, None, protocol, prep, "jax/fista, early stopped on the validation part "
                      "(pass 1 of the 2-pass run)", res[V_ONE])
    row2 = C.make_row("faces", V_TWO, None, protocol, prep, f"jax/fista, {PASSES} passes, each early stopped on "
                      "the validation part", res[V_TWO])
    d2 = _paired(res[V_TWO], res[V_ONE])
    d2e = _paired(res[V_TWO], res[V_ONE], "energy")
    row2["comparisons"] = [{"label": "2-pass - 1-pass LMNN, kNN", **d2},
                           {"label": "2-pass - 1-pass LMNN, energy rule", **d2e}]
    one, mp = C.jmlr(ROW_ONE, "oFaces"), C.jmlr(ROW_MP, "oFaces")
    assert C.direction(mp, one) == "above"  # Table 1, oFaces: multiple passes above single-pass LMNN
    checks = [
        C.assert_not_below({"two_pass-one_pass": d2}, "two_pass", "one_pass", C.not_below_what(
            "faces", "2-pass LMNN kNN", "1-pass LMNN kNN", mp - one)),
        C.assert_paper_band(row2["summary"], "lmnn", mp, FACE_PAPER_SPLITS,
                            f"faces: 2-pass LMNN 3-NN error consistent with the paper's {mp:.2f} %"),
        C.assert_paper_band(row1["summary"], "lmnn", one, FACE_PAPER_SPLITS,
                            f"faces: 1-pass LMNN 3-NN error consistent with the paper's {one:.2f} %"),
    ]
    s1, s2 = row1["summary"], row2["summary"]
    ranks = [r.extra["rank"] for r in res[V_TWO]]
    notes = [
        f"Paper (JMLR 2009 Table 1, oFaces; Sec. 4.2 protocol, {FACE_PAPER_SPLITS} splits): LMNN {one:.2f} %, "
        f"multiple passes {mp:.2f} %, multiple metrics {C.jmlr(ROW_MM, 'oFaces'):.2f} %, kNN PCA "
        f"{C.jmlr('kNN PCA', 'oFaces'):.2f} %. Here {n} splits: 1 pass {s1['lmnn']['mean']:.2f} +- "
        f"{s1['lmnn']['se']:.2f} %, 2 passes {s2['lmnn']['mean']:.2f} +- {s2['lmnn']['se']:.2f} % (paired "
        f"{d2['mean']:+.2f} pp, s.e. {d2['se']:.2f}; energy rule {d2e['mean']:+.2f} pp, s.e. {d2e['se']:.2f}); "
        f"Euclidean after PCA {s1['euclidean']['mean']:.2f} %.",
        f"{PASSES} passes (the paper does not give its number for Table 1); each pass early stopped on the same "
        f"{FACE_VALIDATION:.0f} % validation part (patience {FACE_PATIENCE} re-checks), the kNN and energy rules on "
        "all training images; rank of the composed map " + (f"{min(ranks)}..{max(ranks)}" if ranks else "-")
        + f" of {FACE_EIGENFACES}. Mean seconds per split (both passes): {s2['solve_time']['mean']:.1f}.",
        "Multi-metric LMNN (Table 1's MM row) is not run on the faces: one split's joint program (40 metrics of "
        f"{FACE_EIGENFACES}x{FACE_EIGENFACES}) on the JAX backend ran 5.5 minutes and took 8 GB, past its 150 s "
        "time limit, and was stopped.",
    ]
    C.finish("extensions-faces", "Multi-pass LMNN on the Olivetti faces (JMLR 2009 Sec. 5.1, Table 1 oFaces)",
             [row1, row2], checks, notes, t0)
