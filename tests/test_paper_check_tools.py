"""The paper checks' shared machinery for method tables (paper_checks/_common.py, make_results.py):
paired tests that fail when a learned map is replaced by the identity, and tables rendered as stored."""

import json
import pathlib
import sys

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import FunctionTransformer

import metricopt as mo

PAPER_CHECKS = pathlib.Path(__file__).resolve().parent.parent / "paper_checks"


@pytest.fixture(scope="module")
def common():
    sys.path.insert(0, str(PAPER_CHECKS))
    try:
        import _common
        import make_results

        yield _common, make_results
    finally:
        sys.path.remove(str(PAPER_CHECKS))


def _splits(common, methods, n=4):
    from metricopt import datasets

    X, y = load_wine(return_X_y=True)
    per = []
    for tr, te in datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0):
        per.append(common.run_methods(methods, X[tr], y[tr], X[te], y[te], k=3, loo=True))
    return per


def test_paired_gain_holds_for_lda_on_raw_wine_and_fails_for_the_identity(common):
    C, _ = common
    methods = {"Euclidean": lambda X, y: FunctionTransformer().fit(X, y),
               "identity": lambda X, y: FunctionTransformer().fit(X, y),
               "LDA": lambda X, y: mo.LDA().fit(X, y)}
    per = _splits(C, methods)
    assert set(per[0]) == set(methods) and per[0]["LDA"]["status"] == "closed_form"
    assert C.assert_paired_gain(per, "LDA", "Euclidean", "t").passed
    same = C.assert_paired_gain(per, "identity", "Euclidean", "t")
    assert not same.passed and same.measured.startswith("+0.00 pp")
    assert C.assert_paired_not_worse(per, "identity", "Euclidean", "t").passed
    assert not C.assert_paired_not_worse(per, "Euclidean", "LDA", "t").passed
    # training leave-one-out errors are measured too
    assert np.isfinite(per[0]["LDA"]["train_loo"])


def test_method_tables_are_stored_and_rendered(common, tmp_path):
    C, make_results = common
    methods = {"Euclidean": lambda X, y: FunctionTransformer().fit(X, y), "LDA": lambda X, y: mo.LDA().fit(X, y)}
    per = _splits(C, methods, n=2)
    summary = C.method_summary(per, list(methods))
    table = C.method_table("wine", "wine", "2 splits", summary, list(methods), paper={"Euclidean": 25.0}, loo=True)
    assert table["rows"][0][:2] == ["Euclidean", "2"] and table["rows"][0][4] == "25.00"
    assert table["rows"][1][4] == "not at hand"
    C.RESULTS_DIR, old = tmp_path, C.RESULTS_DIR
    try:
        a = C.assert_paired_gain(per, "LDA", "Euclidean", "wine: LDA below Euclidean")
        C.write_result("demo", "Demo check", [], [a], ["a note"], 1.0, command="cmd", tables=[table])
    finally:
        C.RESULTS_DIR = old
    stored = json.loads((tmp_path / "demo.json").read_text())
    assert stored["tables"][0]["rows"] == table["rows"]
    out = make_results.build(tmp_path, tmp_path / "RESULTS.md")
    text = out.read_text()
    assert "**wine** (2 splits)" in text and "| LDA | 2 |" in text and "not at hand" in text
    assert "wine: LDA below Euclidean" in text


def test_paper_band_shrinks_with_splits_and_fails_on_a_paper_sized_difference(common):
    C, _ = common
    # ours: mean 4.0, s.e. 0.2 over 100 splits (s.d. 2.0); the paper's mean over 100 splits then has s.e. 0.2
    s = {"lmnn": {"mean": 4.0, "se": 0.2}, "n_splits": 100}
    a = C.assert_paper_band(s, "lmnn", 4.5, 100, "x")
    assert a.passed and "0.57 pp" in a.tolerance  # 2 sqrt(0.2^2 + 0.2^2)
    assert not C.assert_paper_band(s, "lmnn", 4.6, 100, "x").passed
    # one split of the paper: its mean is as uncertain as one of our splits
    assert C.assert_paper_band(s, "lmnn", 7.9, 1, "x").passed


def test_paper_size_splits_have_the_paper_sizes_and_are_stratified(common):
    C, _ = common
    y = np.repeat([0, 1, 2], 50)  # iris's labels
    splits = C.paper_size_splits(y, "iris", 5, seed=0)
    assert len(splits) == 5
    for tr, te in splits:
        assert len(tr) == 90 and len(te) == 38 and not set(tr) & set(te)
        assert np.all(np.bincount(y[tr]) == 30)  # stratified: 90 / 3
    assert not np.array_equal(splits[0][0], splits[1][0])
    again = C.paper_size_splits(y, "iris", 5, seed=0)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(splits, again))


def test_the_identity_run_of_a_check_fails_its_gain_assertion(common, monkeypatch):
    C, _ = common
    from metricopt import datasets

    X, y = load_wine(return_X_y=True)
    splits = list(datasets.random_splits(y, n_splits=3, test_size=0.3, seed=0))
    monkeypatch.setattr(C, "IDENTITY", True)
    res = C.run_protocol(X, y, splits, {"backend": "cvxpy"}, scale="standard", label="identity")
    s = C.summarize(res)
    assert {r.status for r in res} == {"identity"}
    assert not C.assert_gain(s, "lmnn", "euclidean", "x").passed
    assert not C.assert_certified(s, res, 1e-6).passed


def test_results_say_whether_a_checks_code_is_that_of_the_current_commit(common):
    _, make_results = common
    head = make_results._git("rev-parse", "--short=12", "HEAD")
    if head is None:
        pytest.skip("not a git checkout")
    h = head[:7]
    assert make_results._code_vs_head(head, head) == f" (metricopt/ as at {h}; check code as at {h})"
    assert make_results._code_vs_head(head + "+dirty", head) == " (uncommitted code: not comparable)"
    assert make_results._code_vs_head("0123456789ab", head) == " (not in this repository)"
    assert make_results._code_vs_head("not recorded", head) == ""
    if make_results._git("rev-parse", "--is-shallow-repository") == "true":
        return  # the oldest commit of a shallow clone may hold the current code
    # the first commit had neither directory's current code
    root = make_results._git("rev-list", "--max-parents=0", "HEAD").split()[0]
    note = make_results._code_vs_head(root, head, "python -m pytest paper_checks/test_paper_uci.py -m slow")
    assert note.startswith(f" (metricopt/ differs from {h}; check code differs from {h}: ")
    changed = make_results.check_code_changes(root, head, "python -m pytest paper_checks/test_paper_uci.py -m slow")
    # the check's own module and the shared modules count; another check's module and the renderers do not
    assert {"test_paper_uci.py", "_common.py"} <= set(changed)
    assert not {"test_paper_letter.py", "make_results.py", "paper_review.py", "README.md"} & set(changed)
    # a command naming no check module is compared on every check module
    assert "test_paper_letter.py" in make_results.check_code_changes(root, head, "python run.py")


def test_a_checks_code_is_its_modules_and_the_test_modules_they_import(common):
    _, make_results = common
    cmd = "OMP_NUM_THREADS=1 python -m pytest paper_checks/test_paper_yale_extensions.py -m slow -s -q"
    assert make_results.check_modules(cmd) == {"test_paper_yale_extensions.py", "test_paper_faces.py"}
    assert make_results.check_modules("pytest test_paper_dimred_mnist.py::test_x") == {
        "test_paper_dimred_mnist.py", "test_paper_dimred.py", "test_paper_mnist.py"}
    assert make_results.check_modules("python -m pytest paper_checks -m slow") is None


def test_paired_below_is_the_strict_point_estimate_and_a_tie_fails(common):
    """``assert_paired_below``: passes on a negative paired mean however noisy, fails on a tie (the identity run, where
    the two maps coincide) and on a positive mean."""
    _common, _ = common
    per = [{"a": {"test": 0.10 + e}, "b": {"test": 0.12}} for e in (0.05, -0.06, -0.02)]  # mean -0.01, not significant
    assert _common.assert_paired_below(per, "a", "b", "a below b", "why").passed
    tie = [{"a": {"test": 0.12}, "b": {"test": 0.12}} for _ in range(3)]
    above = [{"a": {"test": 0.13}, "b": {"test": 0.12}} for _ in range(3)]
    assert not _common.assert_paired_below(tie, "a", "b", "a below b", "why").passed
    assert not _common.assert_paired_below(above, "a", "b", "a below b", "why").passed
    assert "mean(a - b) < 0" in _common.assert_paired_below(tie, "a", "b", "a below b", "why").tolerance


def test_a_multipass_row_counts_every_pass(common):
    """``count_pass_statuses``: the multi-pass row's certificate summary counts each pass's solve, not one per split."""
    from types import SimpleNamespace

    _common, _ = common
    row = {"summary": {"certificates": {"statuses": {"optimal": 2}, "solves": 2}}}
    results = [SimpleNamespace(status="optimal", extra={"pass_statuses": ["optimal", "time_limit"]}),
               SimpleNamespace(status="optimal", extra={"pass_statuses": ["optimal", "optimal"]})]
    assert _common.count_pass_statuses(row, results) == {"optimal": 3, "time_limit": 1}
    assert row["summary"]["certificates"] == {"statuses": {"optimal": 3, "time_limit": 1}, "solves": 4}


def test_run_all_plans_the_longest_checks_first_and_an_identity_run_that_passes_is_a_problem(common, tmp_path):
    """``paper_checks/run_all.py``: a module's expected time is the stored results' wall times of the commands that
    named it (an import does not count), unknown modules first; a check that fails and an identity run that passes
    are the run's problems."""
    sys.path.insert(0, str(PAPER_CHECKS))
    try:
        import run_all
    finally:
        sys.path.remove(str(PAPER_CHECKS))
    stored = {"a.json": ("python -m pytest paper_checks/test_paper_a.py -m slow", 60.0),
              "a2.json": ("python -m pytest paper_checks/test_paper_a.py::t2 -m slow", 30.0),
              "a-identity.json": ("python -m pytest paper_checks/test_paper_a.py -m slow", 5.0),
              "b.json": ("python -m pytest paper_checks/test_paper_b.py -m slow", 600.0)}
    for name, (command, wall) in stored.items():
        (tmp_path / name).write_text(json.dumps({"command": command, "wall_time_s": wall}), encoding="utf-8")
    jobs = run_all.plan(tmp_path, ["test_paper_a.py", "test_paper_b.py", "test_paper_new.py"])
    inf = float("inf")
    assert [(j.name, j.expected_s) for j in jobs] == [
        ("test_paper_b-identity", inf), ("test_paper_new", inf), ("test_paper_new-identity", inf),
        ("test_paper_b", 600.0), ("test_paper_a", 90.0), ("test_paper_a-identity", 5.0)]
    assert jobs[0].command().startswith("METRICOPT_PAPER_IDENTITY=1 OMP_NUM_THREADS=1 ")
    assert jobs[3].command().endswith("--noconftest paper_checks/test_paper_b.py -m slow -s -q")
    done = {j.name: (0, 1.0) for j in jobs} | {"test_paper_a": (1, 1.0), "test_paper_b-identity": (1, 1.0)}
    assert run_all.verdict(jobs, done) == [
        "test_paper_new-identity: the identity run passed: its check cannot fail",
        "test_paper_a: failed (exit 1; see its log)",
        "test_paper_a-identity: the identity run passed: its check cannot fail"]
