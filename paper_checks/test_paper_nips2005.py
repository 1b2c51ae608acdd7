r"""Paper check: the NIPS 2005 protocol of LMNN on the small UCI sets (iris, wine, balance scale) and the AT&T faces.

Weinberger, Blitzer & Saul, *Distance Metric Learning for Large Margin Nearest Neighbor Classification*,
NIPS 18, 2005 (``lmnn-nips2005.txt``), Section 3 and Table 1. Unlike JMLR 2009 (Section 4: ``k = 3`` and
``mu = 0.5`` throughout; the checks of ``test_paper_uci.py``), the NIPS paper set both the number of target
neighbours ``k`` and the weight ``c`` of the push term of its Eq. 2 by cross validation, on a further split of
each training set into a training and a validation part. Its cost is ``pull + c * push``, the JMLR cost
``(1 - mu) * pull + mu * push`` up to the factor ``1 - mu``, so ``c = mu / (1 - mu)`` and a grid over ``mu``
is a grid over ``c``.

Protocol as implemented (every size and count from ``paper_numbers.csv``):

* splits: NIPS 2005 Table 1's training and test sizes (iris 106/44 and wine 126/52: the whole of scikit-learn's
  150 and 178 points; bal 445/90: a stratified random subsample of 535 of UCI's 625 points per split, since
  which points the paper kept is not known), stratified, a new random split per run;
* model selection, per split: the training part is split once more, stratified, into 70 % inner training and
  30 % validation (the paper does not give the fraction); LMNN is solved on the inner training part for every
  ``(k, mu)`` of :data:`GRID_K` x :data:`GRID_MU` and the pair with the lowest validation kNN error (kNN with
  the same ``k``) is kept; ties go to the pair nearest JMLR 2009's ``k = 3, mu = 0.5`` (then the smaller
  ``k``, then the smaller ``mu``). The Euclidean baseline's ``k`` is selected on the same validation part over
  the same ``k`` grid (the paper does not say how it chose its Euclidean ``k``);
* the metric of the test is then solved on the whole training part with the selected ``(k, mu)``; the kNN
  rule uses the selected ``k`` (the paper does not separate the target-neighbour ``k`` from the
  classification ``k``); the energy rule (NIPS 2005 Section 3; JMLR 2009 Eq. 15) uses the selected ``k`` and
  ``mu`` and the metric's target neighbours;
* no PCA on the UCI sets: NIPS 2005 Table 1 lists as many features after PCA as input dimensions for the three
  sets (a full-rank PCA is a rotation, which changes neither kNN nor the LMNN optimum); no feature scaling (the
  paper states none);
* the AT&T faces (Sec. 3, "Face recognition"; Table 1, Faces): the Olivetti file's 64x64 images area-averaged to
  the paper's 38x31 pixels (Table 1: 1,178 input dimensions), pixels / 255, projected on 30 eigenfaces (Sec. 3 and
  Table 1) by a PCA fitted on each split's training images; Table 1's 280/120 split, stratified, is the text's 7
  training and 3 test images of each person. The inner training part then holds 4-5 images a person, so ``k = 5``
  target neighbours do not exist there: the faces' ``k`` grid is ``{1, 3}``. The JAX backend to a certified gap
  of ``1e-3``;
* errors: test errors of the tie-inclusive kNN rule (:data:`_common.TIES`; the paper's rule of reducing
  ``k`` on a tied vote, applied to whole groups of equally distant points; the index-rule errors, which
  drop one neighbour at a time, are stored beside them) and training leave-one-out errors (the paper's
  training errors of Fig. 2 are leave-one-out estimates);
* solves: every LMNN solve (grid and final) is certified by its duality gap (:func:`metricopt.certify`):
  the exact CVXPY backend with Clarabel (gap ``<= 1e-6``) on iris and balance (SCS ended one balance grid
  solve ``optimal_inaccurate`` at a 0.4 relative gap in a trial run, and Clarabel was faster on both sets),
  the JAX backend stopped at a certified gap of ``1e-4`` on wine, whose unscaled features (0.1 .. 1680) make
  the conic solvers slow (Clarabel took about 3 s a grid solve there, the JAX backend about 1.5 s).

What is asserted, and why only that: NIPS 2005 prints no error rate for these sets (its Table 1 has sizes,
solver figures and run counts; its error rates are the bars of Fig. 2, which the text copy does not assign to
data sets, and no number is read off the bars). Its text states one direction: except on the smallest data
set (iris, where it suspects over-training), the learned metrics gave significant improvements of kNN
classification both in training and in testing (Section 3; the Fig. 2 caption says lower test error on all
but the smallest set; its faces paragraph points to the improvements of Fig. 2 too). So, on wine, balance and
the faces: LMNN's kNN test error and its training leave-one-out error significantly below Euclidean's (paired mean difference ``< -2`` s.e. over the splits). On iris the text gives
no direction to assert, and the energy rule's "generally" further reductions are not a per-set claim: those
are reported, not asserted. Every set: every solve certified, and each rule's test error below that of
always predicting the majority class of the training part (sanity).

Runs: the paper's count (Table 1 and Section 3), which fits in about 15 minutes a set on one core (the faces
about 30) (:data:`SETS`); ``METRICOPT_PAPER_SPLITS_NIPS2005_IRIS`` (``_WINE``, ``_BALANCE_SCALE``, ``_FACES``) or
``METRICOPT_PAPER_SPLITS`` override them. Under ``METRICOPT_PAPER_IDENTITY=1`` every LMNN metric, on the grid
and final, is the identity: the selection then keeps the Euclidean ``k`` and the gain assertions must fail.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import _common as C
import metricopt
from metricopt import datasets
from metricopt.methods.lmnn.energy import energy_predict
from paper_numbers import value

pytestmark = pytest.mark.slow

CHECK = "nips2005"

#: the grids of the model selection (ours: the paper does not give its grids)
GRID_K = (1, 3, 5)
GRID_MU = (0.25, 0.5, 0.75)
#: the fraction of each training part held out for the model selection (ours: the paper does not give it)
INNER_VALIDATION = 0.3
#: the preferred pair on tied validation errors (JMLR 2009 Sec. 4's setting, the other LMNN checks')
PREFERRED = (C.K, C.MU)

#: per set: the column of NIPS 2005 Table 1, the solve options, the certified gap asserted, the default runs
#: (the paper's 100: at most about 15 minutes a set on one core), and whether the paper's text states the gain there
SETS = {
    "iris": {"column": "Iris", "solve": {"backend": "cvxpy", "solver": "CLARABEL"}, "gap_tol": 1e-6, "splits": 100,
             "gain": False},
    "wine": {"column": "Wine", "solve": {"backend": "jax", "tol": 1e-4}, "gap_tol": 1e-4, "splits": 100,
             "gain": True},
    "balance-scale": {"column": "Bal", "solve": {"backend": "cvxpy", "solver": "CLARABEL"}, "gap_tol": 1e-6,
                      "splits": 100, "gain": True},
    "faces": {"column": "Faces", "solve": {"backend": "jax", "tol": 1e-3}, "gap_tol": 1e-3, "splits": 100,
              "gain": True, "grid_k": (1, 3)},
}

#: the AT&T faces (NIPS 2005 Sec. 3): the image size (JMLR 2009 Sec. 4.2 states the same 38x31 for the same images;
#: NIPS 2005 Table 1's input dimensions are its product) and the eigenfaces kept
FACE_SHAPE = tuple(int(C.jmlr_text("Sec. 4.2", "Olivetti faces", f"image {w} (pixels)")) for w in ("height", "width"))
FACE_EIGENFACES = int(value("nips2005", "Sec. 3", "AT&T faces", "eigenfaces"))

#: the methods of the method table (all evaluated on the same splits)
METHOD_NAMES = ("Euclidean kNN (k by validation)", "Euclidean kNN at LMNN's k", "LMNN kNN (k, mu by validation)",
                "energy rule (k, mu by validation)")


def nips_sizes(dataset):
    """NIPS 2005 Table 1's training and test sizes and number of runs of ``dataset``."""
    col = SETS[dataset]["column"]
    return {"train": int(value("nips2005", "Table 1", col, "examples (train)")),
            "test": int(value("nips2005", "Table 1", col, "examples (test)")),
            "runs": int(value("nips2005", "Table 1", col, "runs"))}


def nips_splits(y, dataset, n_splits, seed=0):
    """Stratified random splits of NIPS 2005 Table 1's sizes.

    Parameters
    ----------
    y : ndarray of shape (n,)
        Labels of the whole set.
    dataset : str
        A key of :data:`SETS`.
    n_splits : int
        Number of splits.
    seed : int, default 0
        Base seed; split ``s`` uses ``seed * 100_003 + s``.

    Returns
    -------
    list of (ndarray, ndarray)
        ``(train_idx, test_idx)`` into the whole set. Where the table's training and test sizes add up to
        fewer points than the set holds (bal), a stratified subsample of their sum is drawn first.
    """
    from sklearn.model_selection import train_test_split

    size = nips_sizes(dataset)
    n = size["train"] + size["test"]
    idx = np.arange(len(y))
    out = []
    for s in range(n_splits):
        rs = seed * 100_003 + s
        sub = idx if n >= len(y) else train_test_split(idx, train_size=n, stratify=y, random_state=rs)[0]
        tr, te = train_test_split(sub, train_size=size["train"], test_size=size["test"], stratify=y[sub],
                                  random_state=rs)
        out.append((np.sort(tr), np.sort(te)))
    return out


def load_set(dataset):
    """The whole set as float features and labels; the faces area-averaged from the 64x64 file to
    :data:`FACE_SHAPE`, pixels / 255."""
    if dataset == "faces":
        assert FACE_SHAPE[0] * FACE_SHAPE[1] == value("nips2005", "Table 1", "Faces", "input dims")
        X64, y = datasets.load("olivetti")
        return C.area_downsample(X64, (64, 64), FACE_SHAPE) / 255.0, np.asarray(y)
    X, y = datasets.load(dataset)
    return np.asarray(X, dtype=float), np.asarray(y)


def prepare_split(dataset, X, train):
    """The features one split uses: the faces projected on the :data:`FACE_EIGENFACES` eigenfaces of the split's
    training images (NIPS 2005 Sec. 3; Table 1's features after PCA); the UCI sets unchanged."""
    if dataset != "faces":
        return X
    from sklearn.decomposition import PCA

    return PCA(n_components=FACE_EIGENFACES, random_state=0).fit(X[train]).transform(X)


def _preference(k, mu):
    """Sort key among pairs of equal validation error: nearest :data:`PREFERRED`, then smaller ``k``, ``mu``."""
    return (abs(k - PREFERRED[0]), k, abs(mu - PREFERRED[1]), mu)


def _solve(X, y, k, mu, solve_options):
    """One LMNN metric (the identity under :data:`_common.IDENTITY`) and its solve record.

    Returns
    -------
    problem : metricopt.LMNNProblem
    M : ndarray of shape (d, d)
    record : dict
        ``status``, ``rel_gap`` (certified relative duality gap; ``inf`` without a certificate) and
        ``seconds``.
    """
    t0 = time.perf_counter()
    problem = metricopt.LMNNProblem(X, y, k=k, mu=mu)
    if C.IDENTITY:
        return problem, np.eye(X.shape[1]), {"status": "identity", "rel_gap": float("inf"), "seconds": 0.0}
    sol = problem.solve(**solve_options)
    cert = sol.certificate
    return problem, sol.M, {"status": str(sol.status), "rel_gap": float(cert.rel_gap) if cert is not None else
                            float("inf"), "seconds": time.perf_counter() - t0}


def _worst_status(statuses):
    """``optimal`` when every solve is, else the first other status."""
    other = [s for s in statuses if s != "optimal"]
    return other[0] if other else "optimal"


def run_nips_split(X, y, train, test, dataset, seed):
    """The NIPS 2005 protocol on one train/test split: select ``(k, mu)`` on a validation part, refit, test.

    Parameters
    ----------
    X, y : ndarray
        The whole set.
    train, test : ndarray of int
        Indices of the split.
    dataset : str
        A key of :data:`SETS` (its solve options).
    seed : int
        Seed of the inner training/validation split.

    Returns
    -------
    result : _common.SplitResult
        ``errors``: test errors (fractions) of Euclidean kNN at its validated ``k``, of LMNN kNN and of the
        energy rule at the validated ``(k, mu)``; ``status``: ``optimal`` if every solve of the split (grid and
        final) is, ``rel_gap``: the largest certified gap among them, ``solve_time``: seconds of the whole split;
        ``extra``: the selection, the validation errors, training leave-one-out and index-rule errors.
    methods : dict
        Per method of :data:`METHOD_NAMES`: ``test`` and ``train_loo`` errors, ``seconds`` and ``status`` (for
        :func:`_common.method_summary`).
    """
    from sklearn.model_selection import train_test_split

    t0 = time.perf_counter()
    opts = SETS[dataset]["solve"]
    Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
    inner, val = train_test_split(np.arange(len(ytr)), test_size=INNER_VALIDATION, stratify=ytr, random_state=seed)
    Xi, yi, Xv, yv = Xtr[inner], ytr[inner], Xtr[val], ytr[val]

    grid_k = SETS[dataset].get("grid_k", GRID_K)
    # Euclidean kNN: k by validation
    val_euclid = {k: metricopt.knn_error(Xi, yi, Xv, yv, k=k, ties=C.TIES) for k in grid_k}
    k_e = min(grid_k, key=lambda k: (val_euclid[k], _preference(k, PREFERRED[1])))

    # LMNN: (k, mu) by validation
    records, val_lmnn = [], {}
    for k, mu in itertools.product(grid_k, GRID_MU):
        _, M, rec = _solve(Xi, yi, k, mu, opts)
        records.append(rec)
        val_lmnn[(k, mu)] = metricopt.knn_error(Xi, yi, Xv, yv, k=k, M=M, ties=C.TIES)
    k_l, mu_l = min(val_lmnn, key=lambda p: (val_lmnn[p], _preference(*p)))
    grid_seconds = time.perf_counter() - t0

    # the final metric on the whole training part
    problem, M, rec = _solve(Xtr, ytr, k_l, mu_l, opts)
    records.append(rec)
    errors = {
        "euclidean": metricopt.knn_error(Xtr, ytr, Xte, yte, k=k_e, ties=C.TIES),
        "lmnn": metricopt.knn_error(Xtr, ytr, Xte, yte, k=k_l, M=M, ties=C.TIES),
        "energy": float(np.mean(energy_predict(Xtr, ytr, Xte, k=k_l, mu=mu_l, M=M,
                                               train_targets=problem.target_neighbors) != yte)),
    }
    euclid_at_kl = metricopt.knn_error(Xtr, ytr, Xte, yte, k=k_l, ties=C.TIES)
    loo_e = metricopt.loo_knn_error(Xtr, ytr, k=k_e, ties=C.TIES)
    loo_e_kl = metricopt.loo_knn_error(Xtr, ytr, k=k_l, ties=C.TIES)
    loo_l = metricopt.loo_knn_error(Xtr, ytr, k=k_l, M=M, ties=C.TIES)
    _, counts = np.unique(ytr, return_counts=True)
    majority_label = np.unique(ytr)[np.argmax(counts)]
    extra = {
        "k_euclidean": int(k_e), "k": int(k_l), "mu": float(mu_l),
        "validation_euclidean": {str(k): float(v) for k, v in val_euclid.items()},
        "validation_lmnn": {f"k={k}, mu={mu}": float(v) for (k, mu), v in val_lmnn.items()},
        "n_inner_train": int(len(inner)), "n_validation": int(len(val)),
        "grid_seconds": float(grid_seconds), "final_solve_seconds": float(rec["seconds"]),
        "statuses": [r["status"] for r in records], "rel_gaps": [r["rel_gap"] for r in records],
        "euclidean_at_lmnn_k": float(euclid_at_kl),
        "train_loo_euclidean": float(loo_e), "train_loo_euclidean_at_lmnn_k": float(loo_e_kl),
        "train_loo_lmnn": float(loo_l),
        "majority_class_error": float(np.mean(yte != majority_label)),
        "euclidean_index_rule": float(metricopt.knn_error(Xtr, ytr, Xte, yte, k=k_e)),
        "lmnn_index_rule": float(metricopt.knn_error(Xtr, ytr, Xte, yte, k=k_l, M=M)),
    }
    seconds = time.perf_counter() - t0
    status = _worst_status(extra["statuses"])
    result = C.SplitResult(errors={m: float(v) for m, v in errors.items()}, status=status,
                           rel_gap=float(max(extra["rel_gaps"])), verdict="-", solve_time=seconds,
                           n_train=len(ytr), n_test=len(yte), dim=X.shape[1], extra=extra)
    lmnn_status = rec["status"]
    methods = {
        METHOD_NAMES[0]: {"test": errors["euclidean"], "train_loo": loo_e, "seconds": 0.0, "status": "-"},
        METHOD_NAMES[1]: {"test": euclid_at_kl, "train_loo": loo_e_kl, "seconds": 0.0, "status": "-"},
        METHOD_NAMES[2]: {"test": errors["lmnn"], "train_loo": loo_l, "seconds": seconds, "status": lmnn_status},
        METHOD_NAMES[3]: {"test": errors["energy"], "train_loo": float("nan"), "seconds": seconds,
                          "status": lmnn_status},
    }
    return result, methods


def _paired(results, a, b):
    """Mean and standard error (pp) of the per-split difference of two ``extra``/``errors`` entries."""
    def get(r, key):
        return r.errors[key] if key in r.errors else r.extra[key]
    mean, se = C.mean_se([100 * (get(r, a) - get(r, b)) for r in results])
    return {"mean": mean, "se": se}


def _gain(d, what, tolerance_text):
    """A paired difference ``d`` significantly below zero (``< -2`` s.e. and ``< 0``)."""
    return C.Assertion(what, tolerance_text, f"{d['mean']:+.2f} pp (s.e. {d['se']:.2f})",
                       d["mean"] < -2.0 * d["se"] and d["mean"] < 0)


def _count(values):
    out = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return ", ".join(f"{k} x{n}" for k, n in sorted(out.items()))


def _run_set(dataset):
    """Run the protocol on one set; return its row, its method table, its assertions and its notes."""
    spec, size = SETS[dataset], nips_sizes(dataset)
    X, y = load_set(dataset)
    n = C.n_splits(f"{CHECK}-{dataset}", spec["splits"])
    t0 = time.perf_counter()
    results, per_split = [], []
    for s, (tr, te) in enumerate(nips_splits(y, dataset, n, seed=0)):
        r, methods = run_nips_split(prepare_split(dataset, X, tr), y, tr, te, dataset, seed=s)
        results.append(r)
        per_split.append(methods)
        e, x = r.errors, r.extra
        print(f"  [nips2005/{dataset}] split {s + 1}: euclid(k={x['k_euclidean']}) {100 * e['euclidean']:.2f}%  "
              f"lmnn(k={x['k']}, mu={x['mu']}) {100 * e['lmnn']:.2f}%  energy {100 * e['energy']:.2f}%  "
              f"status {r.status}  max gap {r.rel_gap:.1e}  {r.solve_time:.1f}s", flush=True)
    seconds = time.perf_counter() - t0

    backend = (f"{spec['solve']['backend']}" + (f", stopped at certified gap {spec['solve']['tol']:g}"
                                                if "tol" in spec["solve"] else
                                                f"/{spec['solve']['solver']}, exact, certified")
               + f"; grid k in {list(spec.get('grid_k', GRID_K))} x mu in {list(GRID_MU)} on a "
               f"{INNER_VALIDATION:.0%} validation part")
    n_all = len(y)
    sub = "" if size["train"] + size["test"] >= n_all else \
        f"stratified subsample of {size['train'] + size['test']} of {n_all}, "
    protocol = f"{sub}stratified {size['train']}/{size['test']} (NIPS 2005 Table 1 sizes), k and mu by validation"
    prep = "none" if dataset != "faces" else (f"64x64 images area-averaged to {FACE_SHAPE[0]}x{FACE_SHAPE[1]}, "
                                              f"pixels / 255, PCA to {FACE_EIGENFACES} eigenfaces fitted on the "
                                              "training part")
    row = C.make_row(dataset, "NIPS 2005 protocol (k, mu by validation)", None, protocol, prep, backend, results)
    s = row["summary"]
    comparisons = {
        "LMNN - Euclidean at LMNN's k (test)": _paired(results, "lmnn", "euclidean_at_lmnn_k"),
        "energy - LMNN kNN (test)": _paired(results, "energy", "lmnn"),
        "LMNN - Euclidean (training leave-one-out, each at its validated k)":
            _paired(results, "train_loo_lmnn", "train_loo_euclidean"),
        "LMNN - Euclidean at LMNN's k (training leave-one-out)":
            _paired(results, "train_loo_lmnn", "train_loo_euclidean_at_lmnn_k"),
    }
    row["comparisons"] = [{"label": k, **v} for k, v in comparisons.items()]
    summary = C.method_summary(per_split, METHOD_NAMES)
    table = C.method_table(f"{dataset}: NIPS 2005 protocol, every rule on the same {n} splits", dataset, protocol,
                           summary, METHOD_NAMES, loo=True,
                           missing="no number printed (Fig. 2 bars only)")

    name = f"{dataset} (NIPS 2005 protocol)"
    majority = C.mean_se([100 * r.extra["majority_class_error"] for r in results])[0]
    checks = [C.assert_certified(s, results, spec["gap_tol"], name=name)]
    checks += [C.Assertion(f"{name}: {C.LABEL[m].replace('3-NN', 'kNN')} test error below the majority-class "
                           "rule's (sanity)", "mean below", f"{s[m]['mean']:.2f} % against {majority:.2f} %",
                           s[m]["mean"] < majority) for m in C.METHODS]
    if spec["gain"]:  # NIPS 2005 Sec. 3 and Fig. 2 caption: gains on all but the smallest set, training and test
        tol = "paired mean difference < -2 s.e. over the splits"
        checks.append(_gain(s["lmnn-euclidean"], f"{name}: LMNN kNN test error below Euclidean kNN's, each at its "
                            "validated k (NIPS 2005 Sec. 3: significant gains except on the smallest set)", tol))
        checks.append(_gain(comparisons["LMNN - Euclidean (training leave-one-out, each at its validated k)"],
                            f"{name}: LMNN training leave-one-out error below Euclidean's (NIPS 2005 Sec. 3: gains "
                            "both in training and testing)", tol))

    x = [r.extra for r in results]
    notes = [
        f"{dataset}: {n} runs (NIPS 2005 Table 1: {size['runs']}), {seconds:.0f} s in all, "
        f"{seconds / n:.1f} s a run ({len(spec.get('grid_k', GRID_K)) * len(GRID_MU) + 1} LMNN solves a run). Selected LMNN k: "
        f"{_count(r['k'] for r in x)}; mu: {_count(r['mu'] for r in x)}; Euclidean k: "
        f"{_count(r['k_euclidean'] for r in x)}. Inner training / validation sizes {x[0]['n_inner_train']} / "
        f"{x[0]['n_validation']}.",
        f"{dataset}: index tie rule (one neighbour dropped at a time on a tied vote, lower training index first "
        f"among equal distances): Euclidean {C.mean_se([100 * r['euclidean_index_rule'] for r in x])[0]:.2f} %, "
        f"LMNN {C.mean_se([100 * r['lmnn_index_rule'] for r in x])[0]:.2f} %, against "
        f"{s['euclidean']['mean']:.2f} % and {s['lmnn']['mean']:.2f} % with the tie-inclusive rule.",
    ]
    if not spec["gain"]:
        notes.append(f"{dataset}: nothing asserted beyond sanity: NIPS 2005 prints no error rate for it and its text "
                     "gives no direction on the smallest set (it suspects over-training there).")
    return row, table, checks, notes


def test_nips2005_protocol():
    t0 = time.perf_counter()
    rows, tables, checks, notes = [], [], [], []
    for dataset in SETS:
        row, table, c, n = _run_set(dataset)
        rows.append(row)
        tables.append(table)
        checks += c
        notes += n
    bal = nips_sizes("balance-scale")
    split_text = "/".join(f"{value('nips2005', 'Sec. 3', 'random splits of each run', c):.0f}"
                          for c in ("training %", "test %"))
    notes += [
        "NIPS 2005 prints no error rate for iris, wine, bal or the faces (Table 1: sizes, solver figures and runs; "
        "Fig. 2: bars not assignable in the text copy); no paper number is compared, and the only assertions "
        "besides sanity are the direction its Sec. 3 states in words for all but the smallest set.",
        "Differences from the paper's protocol: the grids of k and mu and the 30 % validation fraction are ours "
        "(not given); the metric is refitted on the whole training part after the selection (not stated); the "
        "Euclidean k is validated on the same grid (not stated); bal's "
        f"{bal['train'] + bal['test']} points are a random stratified subsample of UCI's 625 per split, and its "
        f"{bal['train']}/{bal['test']} split is Table 1's, not the {split_text} of the text (Sec. 3); LMNN "
        "solved to a certified optimum (iris, bal: Clarabel, gap 1e-6; wine, unscaled as in the paper: the JAX "
        "backend, gap 1e-4; the paper: its own sub-gradient solver); tie-inclusive kNN rule (index rule reported).",
        f"The faces: the Olivetti file's 64x64 images area-averaged to {FACE_SHAPE[0]}x{FACE_SHAPE[1]} (the paper "
        "down-sampled the original images by a method it does not state), PCA fitted on each split's training "
        f"images; k grid {{1, 3}} (the inner training part holds 4-5 images a person, too few for k = 5); the JAX "
        f"backend to a certified gap of 1e-3.",
    ]
    C.finish(CHECK, "NIPS 2005 protocol: iris, wine, balance, AT&T faces (k and mu by validation)", rows, checks,
             notes, t0,
             tables=tables)
