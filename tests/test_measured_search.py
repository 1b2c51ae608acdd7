"""The measured choice between the ball tree and the brute-force impostor search (:class:`metricopt.balltree.MeasuredSearch`)."""

from __future__ import annotations

import numpy as np

import metricopt as mo
from metricopt import balltree
from metricopt.balltree import REMEASURE_AFTER, MeasuredSearch, choose_search

N, DIM = 20_000, 50  # measured: n^2 d = 2e10


def test_small_or_wide_searches_follow_the_rule():
    m = MeasuredSearch()
    # below TREE_MIN_N, below the work, at most TREE_MAX_DIM (the tree won in every case measured), above 64
    for n, dim in [(1500, 40), (2500, 40), (20_000, 20), (20_000, 100)]:
        assert not MeasuredSearch.measured(n, dim)
        m.record("tree", 0.0, dim)  # timings do not move an unmeasured case
        assert m.pick(n, dim) == choose_search(n, dim)


def test_the_rule_first_the_other_next_then_the_faster_and_the_slower_again_later():
    m = MeasuredSearch()
    rule = choose_search(N, DIM)
    other = "tree" if rule == "brute" else "brute"
    assert m.pick(N, DIM) == rule
    m.record(rule, 3.0, DIM)
    assert m.pick(N, DIM) == other
    m.record(other, 1.0, DIM)
    for _ in range(REMEASURE_AFTER - 1):  # the faster one, until the slower is due again
        assert m.pick(N, DIM) == other
        m.record(other, 1.0, DIM)
    assert m.pick(N, DIM) == rule
    m.record(rule, 0.5, DIM)  # the metric changed: now the rule's search is faster
    assert m.pick(N, DIM) == rule


def test_times_in_another_dimension_are_not_compared():
    m = MeasuredSearch()
    m.record("tree", 10.0, 48)
    m.record("brute", 1.0, 48)
    assert m.pick(N, 24) == choose_search(N, 24) == "tree"  # 24 columns: nothing measured there yet


def test_a_solve_measures_both_and_finds_the_rules_triplets(monkeypatch):
    # lower the work threshold so that a small problem is measured: both searches then answer its re-checks, with
    # the triplets and hinge values of the rule's search
    monkeypatch.setattr(balltree, "MEASURED_MIN_WORK", 1.0)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 600)
    X = rng.normal(size=(2400, 30)) + 2.0 * rng.normal(size=(4, 30))[y]
    used = []
    record = MeasuredSearch.record
    monkeypatch.setattr(MeasuredSearch, "record", lambda self, m, s, d: (used.append(m), record(self, m, s, d)))
    P = mo.LMNNProblem(X, y, k=3, mu=0.5)
    M = np.diag(rng.uniform(0.5, 2.0, size=30))
    ref = mo.LMNNProblem(X, y, k=3, mu=0.5, search="brute").find_triplets(M, margin=0.3)
    for _ in range(3):
        got = P._search(M, 0.3, None)  # a search of all triplets each time
        order = np.lexsort(got[2::-1]), np.lexsort(ref[2::-1])
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a[order[0]], b[order[1]])
    assert set(used) == {"tree", "brute"}


def test_under_a_deadline_nothing_is_tried_for_its_time():
    from metricopt._deadline import deadline

    m = MeasuredSearch()
    rule = choose_search(N, DIM)
    m.record(rule, 3.0, DIM)
    with deadline(1e18):
        assert m.pick(N, DIM) == rule  # the other one is not tried
    other = "tree" if rule == "brute" else "brute"
    m.record(other, 1.0, DIM)
    for _ in range(2 * REMEASURE_AFTER):
        m.record(other, 1.0, DIM)
    with deadline(1e18):
        assert m.pick(N, DIM) == other  # the faster, the slower not timed again
    assert m.pick(N, DIM) == rule
