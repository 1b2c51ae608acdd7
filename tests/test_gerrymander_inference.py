"""Tests for metricopt.methods.gerrymander.inference: exact latent-set inference (Trivedi, McAllester & Shakhnarovich, NIPS 2014).

Exactness is checked against brute force over all k-subsets (itertools.combinations), written here
from the definitions and nowhere else: S(h) = -sum_{j in h} d_j, "t wins h by tau" iff
n_t(h) >= n_c(h) + tau for every other class c, Lambda(y, h) = the largest loss over the tied winners.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metricopt.errors import InputError
from metricopt.methods.gerrymander.inference import (
    InferenceResult, correct_inference, infer_all, infer_rows, latent_knn_predict, loss_augmented_inference,
    metric_distances, paper_targeted_inference, targeted_inference, vote, zero_one_loss)
from metricopt.knn import knn_predict

HYP = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-12


# ---------------------------------------------------------------------------
# brute force, from the definitions
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def combos(n, k):
    """All k-subsets of range(n), one per row, ascending."""
    return np.array(list(itertools.combinations(range(n), k)), dtype=np.intp).reshape(-1, k)


def subset_counts(labels, n_classes, k):
    """(n_subsets, R) class counts of every k-subset."""
    onehot = np.eye(n_classes, dtype=np.int64)[labels]
    return onehot[combos(labels.size, k)].sum(axis=1)


def wins(counts, t, tau):
    """Whether class t wins each row of counts by tau."""
    others = np.delete(counts, t, axis=1)
    return np.all(counts[:, [t]] >= others + tau, axis=1)


def brute_force_targeted(dist, labels, target, k, tau, n_classes):
    """max S(h) over the k-subsets that target wins by tau: (best score or -inf, mask of optimal subsets)."""
    scores = -dist[combos(dist.size, k)].sum(axis=1)
    ok = wins(subset_counts(labels, n_classes, k), target, tau)
    if not np.any(ok):
        return -np.inf, ok
    best = scores[ok].max()
    return best, ok & (scores >= best - TOL)


def brute_force_loss_augmented(dist, labels, y, k, loss):
    """max over all k-subsets of S(h) + max_{c tied for the top count} loss[y, c]."""
    counts = subset_counts(labels, loss.shape[0], k)
    tied = counts == counts.max(axis=1, keepdims=True)
    lam = np.where(tied, loss[y][None, :], -np.inf).max(axis=1)
    return float((-dist[combos(dist.size, k)].sum(axis=1) + lam).max())


def score_of(dist, h):
    return -float(np.sum(dist[h]))


def random_case(rng):
    """A tiny problem: N 5..12 candidates, k 1..8 (k <= N), 1..4 classes, integer (tied) or real distances."""
    n = int(rng.integers(5, 13))
    k = int(rng.integers(1, min(8, n) + 1))
    n_classes = int(rng.integers(1, 5))
    labels = rng.integers(0, n_classes, size=n)
    dist = rng.integers(0, 5, size=n).astype(float) if rng.random() < 0.5 else rng.random(n) * 3
    return dist, labels, k, n_classes


def cases(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        dist, labels, k, n_classes = random_case(rng)
        yield dist, labels, k, n_classes, int(rng.integers(0, n_classes)), int(rng.integers(0, 2))


# ---------------------------------------------------------------------------
# targeted inference: exact against brute force
# ---------------------------------------------------------------------------


def check_targeted(dist, labels, target, k, tau, n_classes):
    classes = np.arange(n_classes)
    h, score = targeted_inference(dist, labels, target, k, tau=tau, classes=classes)
    best, optimal = brute_force_targeted(dist, labels, target, k, tau, n_classes)
    if best == -np.inf:
        assert h is None and score == -np.inf
        return False
    assert h is not None and h.shape == (k,) and np.all(np.diff(h) > 0)
    assert abs(score - best) <= TOL and score == score_of(dist, h)
    counts, _ = vote(labels[h], classes)
    assert wins(counts[None, :], target, tau)[0]
    assert np.any(np.all(combos(dist.size, k)[optimal] == h, axis=1))  # h itself achieves the optimum
    return True


def test_targeted_inference_equals_brute_force_on_3000_cases():
    feasible = ties = 0
    for dist, labels, k, n_classes, target, tau in cases(0, 3000):
        feasible += check_targeted(dist, labels, target, k, tau, n_classes)
        ties += np.unique(dist).size < dist.size
    assert 500 < feasible < 2900 and ties > 1000  # both feasible and infeasible cases, many exact ties


@HYP
@given(
    dist=st.lists(st.integers(0, 4), min_size=5, max_size=10),
    data=st.data(),
)
def test_targeted_inference_equals_brute_force_hypothesis(dist, data):
    n = len(dist)
    labels = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    k = data.draw(st.integers(1, min(6, n)))
    check_targeted(np.array(dist, dtype=float), labels, data.draw(st.integers(0, 2)), k, data.draw(st.sampled_from([0, 1])), 3)


def test_targeted_inference_is_deterministic_and_breaks_ties_by_lower_index():
    dist = np.array([1.0, 1.0, 1.0, 1.0])
    labels = np.array([0, 0, 0, 0])
    h, score = targeted_inference(dist, labels, 0, 2)
    assert h.tolist() == [0, 1] and score == -2.0
    assert targeted_inference(dist, labels, 1, 2) == (None, -np.inf)  # target without candidates
    assert targeted_inference(dist, labels, 0, 5) == (None, -np.inf)  # k > N


def test_one_class_is_won_by_any_set():
    dist = np.array([3.0, 1.0, 2.0])
    for tau in (0, 1):
        h, score = targeted_inference(dist, np.zeros(3, dtype=int), 0, 2, tau=tau)
        assert h.tolist() == [1, 2] and score == -3.0


def test_correct_inference_is_the_strict_targeted_inference():
    dist = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    labels = np.array(["a", "b", "a", "b", "a"])
    h, score = correct_inference(dist, labels, "a", 2)
    assert h.tolist() == [0, 2] and score == -2.0  # a strict majority of two is two a's
    assert correct_inference(dist, labels, "b", 4) == (None, -np.inf)  # only two b's: at best a tie
    h, score = correct_inference(dist, labels, "a", 3)
    assert h.tolist() == [0, 1, 2] and score == -3.0
    assert targeted_inference(dist, labels, "a", 2, tau=0)[0].tolist() == [0, 1]


# ---------------------------------------------------------------------------
# loss-augmented inference: exact against brute force
# ---------------------------------------------------------------------------


def test_loss_augmented_inference_equals_brute_force_on_2000_cases():
    rng = np.random.default_rng(1)
    for case, (dist, labels, k, n_classes, y, _) in enumerate(cases(2, 2000)):
        kind = case % 3
        if kind == 0:
            loss = zero_one_loss(n_classes)
        elif kind == 1:
            loss = rng.integers(0, 4, size=(n_classes, n_classes)).astype(float)  # ties among losses
        else:
            loss = rng.random((n_classes, n_classes)) * 4
        np.fill_diagonal(loss, 0.0)
        classes = np.arange(n_classes)
        h, value, y_hat = loss_augmented_inference(dist, labels, y, k, loss=loss, classes=classes)
        best = brute_force_loss_augmented(dist, labels, y, k, loss)
        assert abs(value - best) <= TOL
        counts, winners = vote(labels[h], classes)
        assert y_hat in winners and loss[y, y_hat] == max(loss[y, c] for c in winners)
        assert value == score_of(dist, h) + loss[y, y_hat]


def test_loss_augmented_default_loss_and_string_labels():
    dist = np.array([0.0, 0.0, 1.0, 5.0])
    labels = np.array(["cat", "cat", "dog", "dog"])
    h, value, y_hat = loss_augmented_inference(dist, labels, "cat", 2)
    # {cat, dog} ties, so the worst tied winner 'dog' costs 1: value -1 + 1 = 0 >= {cat, cat}: 0 + 0;
    # equal values keep the first class in order ('cat')
    assert value == 0.0 and y_hat == "cat" and h.tolist() == [0, 1]
    h, value, y_hat = loss_augmented_inference(dist, labels, "cat", 2, loss=[[0, 2], [2, 0]], classes=["cat", "dog"])
    assert value == 1.0 and y_hat == "dog" and h.tolist() == [0, 2]


# ---------------------------------------------------------------------------
# the paper's greedy: never better, sometimes worse
# ---------------------------------------------------------------------------


def greedy_gap(dist, labels, target, k, tau, n_classes):
    classes = np.arange(n_classes)
    h, score = targeted_inference(dist, labels, target, k, tau=tau, classes=classes)
    hg, score_g = paper_targeted_inference(dist, labels, target, k, tau=tau, classes=classes)
    assert (h is None) == (hg is None)  # the greedy finds a set exactly when one exists
    if h is None:
        return None
    counts, _ = vote(labels[hg], classes)
    assert wins(counts[None, :], target, tau)[0] and hg.shape == (k,)
    assert score_g <= score + TOL  # never better than the optimum
    return score_g < score - TOL


def test_paper_greedy_is_never_better_and_its_miss_rate(capsys):
    misses = collections.Counter()
    total = collections.Counter()
    for dist, labels, k, n_classes, target, tau in cases(0, 3000):
        miss = greedy_gap(dist, labels, target, k, tau, n_classes)
        if miss is not None:
            total[k, n_classes] += 1
            misses[k, n_classes] += miss
    with capsys.disabled():
        print("\npaper greedy misses (feasible cases): " + ", ".join(
            f"k={k} R={r}: {misses[k, r]}/{total[k, r]}" for k, r in sorted(total)))
    assert sum(total.values()) > 500


def test_paper_greedy_misses_for_k8_four_classes_strict():
    rng = np.random.default_rng(3)
    misses = feasible = 0
    for _ in range(3000):
        n = int(rng.integers(10, 13))
        labels = rng.integers(0, 4, size=n)
        dist = rng.random(n)
        miss = greedy_gap(dist, labels, int(rng.integers(0, 4)), 8, 1, 4)
        feasible += miss is not None
        misses += bool(miss)
    print(f"\nk=8, R=4, tau=1, N=10..12: greedy strictly worse in {misses}/{feasible} feasible cases")
    assert misses >= 1


def test_paper_greedy_hand_made_counter_example():
    # three own points at 0 (seed n* = ceil((8 + 3) / 4) = 3, others capped at 2), then a1 a2 a3 b1 c1 b2 y4.
    # The greedy takes a1, a2, skips a3 (a at its cap), takes b1, c1, b2: total 15.5. Taking the fourth own
    # point lifts the caps to 3, and y4 + a3 (8.5) beats c1 + b2 (9): the optimum is 15.
    dist = np.array([0, 0, 0, 1, 2, 3, 3.5, 4, 5, 5.5])
    labels = np.array(list("yyyaaabcby"))
    h, score = targeted_inference(dist, labels, "y", 8)
    hg, score_g = paper_targeted_inference(dist, labels, "y", 8)
    assert (h.tolist(), score) == ([0, 1, 2, 3, 4, 5, 6, 9], -15.0)
    assert (hg.tolist(), score_g) == ([0, 1, 2, 3, 4, 6, 7, 8], -15.5)


# ---------------------------------------------------------------------------
# infer_all
# ---------------------------------------------------------------------------


def blobs(seed, sizes, d=2):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(loc=2.0 * c, size=(m, d)) for c, m in enumerate(sizes)])
    y = np.repeat(np.arange(len(sizes)), sizes)
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    return D, y


@pytest.mark.parametrize("k", [1, 4, 7])
def test_infer_all_sets_scores_and_surrogate(k):
    D, y = blobs(0, [15, 12, 9])
    loss = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    res = infer_all(D, y, k, loss=loss, block_size=7)
    n = y.size
    assert res.h_star.shape == res.h_hat.shape == (n, k)
    assert np.all(res.surrogate >= -TOL)
    assert np.array_equal(res.loss, loss[y, res.y_hat])
    for i in range(n):
        assert i not in res.h_star[i] and i not in res.h_hat[i]
        counts, winners = vote(y[res.h_star[i]], res.classes)
        assert winners.tolist() == [y[i]]  # y_i wins h*_i strictly
        assert res.score_star[i] == score_of(D[i], res.h_star[i])
        assert res.score_hat[i] == score_of(D[i], res.h_hat[i])
        # the same as the one-query functions on the other points
        others = np.delete(np.arange(n), i)
        h, s = correct_inference(D[i, others], y[others], y[i], k, classes=res.classes)
        assert np.array_equal(others[h], res.h_star[i]) and s == res.score_star[i]
        h, v, y_hat = loss_augmented_inference(D[i, others], y[others], y[i], k, loss=loss, classes=res.classes)
        assert np.array_equal(others[h], res.h_hat[i]) and y_hat == res.y_hat[i]
        assert v == pytest.approx(res.score_hat[i] + res.loss[i], abs=TOL)
    whole = infer_all(D, y, k, loss=loss)  # one block: the same result
    assert np.array_equal(whole.h_star, res.h_star) and np.array_equal(whole.h_hat, res.h_hat)


def test_infer_all_paper_greedy_is_feasible_and_never_better():
    D, y = blobs(1, [10, 10, 10, 10], d=1)
    exact = infer_all(D, y, 8)
    paper = infer_all(D, y, 8, inference="paper")
    assert np.all(paper.score_star <= exact.score_star + TOL)
    assert np.all(paper.score_hat + paper.loss <= exact.score_hat + exact.loss + TOL)
    for i in range(y.size):
        assert vote(y[paper.h_star[i]], paper.classes)[1].tolist() == [y[i]] and i not in paper.h_star[i]


def test_infer_all_too_small_class_message():
    D, y = blobs(2, [10, 10, 2])
    message = (
        "the correct latent set h* does not exist for k=5: a point wins a strict majority of its k neighbours "
        "only with enough other points of its own class, and these classes are too small: 2 has 2 point(s), so "
        "1 other(s) of its class per point, but needs at least 3. Use a smaller k or drop those classes; "
        "training cannot proceed without h*."
    )
    with pytest.raises(InputError, match=re.escape(message)):
        infer_all(D, y, 5)
    assert infer_all(D, y, 1).surrogate.shape == (22,)  # k=1: the point's one other own point suffices


# ---------------------------------------------------------------------------
# prediction rule, vote, validation
# ---------------------------------------------------------------------------


def test_latent_knn_predict_breaks_a_tie_by_the_nearest_tied_class():
    # a query at 0 and training points on a line at 1 (A), 2 (B), 3 (B), 4 (A), 5 (C): k=4 ties A and B,
    # the nearest of the tied classes is A. Weinberger & Saul's rule (metricopt.knn) drops the farthest and
    # predicts B: a different rule, which is why latent_knn_predict has its own vote.
    X_train = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])
    y_train = np.array(["A", "B", "B", "A", "C"])
    D = (X_train.T - np.array([[0.0], [2.6]])) ** 2  # second query at 2.6: 3 (B), 2 (B), 4 (A), 1 (A)
    assert latent_knn_predict(D, y_train, 4).tolist() == ["A", "B"]
    assert knn_predict(X_train, y_train, np.array([[0.0]]), k=4).tolist() == ["B"]
    assert latent_knn_predict(D, y_train, 3).tolist() == ["B", "B"]  # a clear majority
    # equal distances: the lower training index is the nearer neighbour
    assert latent_knn_predict(np.array([[1.0, 1.0, 1.0, 1.0]]), np.array([1, 0, 0, 1]), 2).tolist() == [1]


def test_vote_counts_and_winners():
    counts, winners = vote(["b", "a", "b", "c", "a"], ["c", "b", "a"])
    assert counts.tolist() == [1, 2, 2] and winners.tolist() == ["b", "a"]
    with pytest.raises(InputError, match="which is not one of the classes"):
        vote(["d"], ["a", "b"])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: targeted_inference([1.0, 2.0], [0, 1], 0, 0), "k must be >= 1; got 0"),
        (lambda: targeted_inference([1.0, 2.0], [0, 1], 0, 1.5), "k must be an integer; got 1.5"),
        (lambda: targeted_inference([1.0, 2.0], [0, 1], 0, 1, tau=2), "tau must be 0 .* or 1 .*; got 2"),
        (lambda: targeted_inference([1.0, np.nan], [0, 1], 0, 1), "NaN or infinite"),
        (lambda: targeted_inference([1.0, -1.0], [0, 1], 0, 1), "negative distances"),
        (lambda: targeted_inference([[1.0, 2.0]], [0, 1], 0, 1), "1-D array of shape"),
        (lambda: targeted_inference([1.0, 2.0], [0, 1, 1], 0, 1), "one label per candidate"),
        (lambda: targeted_inference([1.0, 2.0], [0, 1], 2, 1, classes=[0, 1]), "target contains 2"),
        (lambda: loss_augmented_inference([1.0, 2.0], [0, 1], 0, 1, loss=np.ones((3, 3))), r"shape \(R, R\) = \(2, 2\)"),
        (lambda: loss_augmented_inference([1.0, 2.0], [0, 1], 0, 1, loss=np.ones((2, 2))), "zero diagonal"),
        (lambda: loss_augmented_inference([1.0, 2.0], [0, 1], 0, 1, loss=[[0, -1], [1, 0]]), "negative entries"),
        (lambda: infer_all(np.zeros((3, 2)), [0, 1, 1], 1), r"square \(n, n\)"),
        (lambda: infer_all(np.zeros((3, 3)), [0, 1, 1], 3), "k=3 is larger than the number of candidates"),
        (lambda: infer_all(np.zeros((3, 3)), [0, 1, 1], 1, inference="fast"), "unknown inference 'fast'"),
        (lambda: latent_knn_predict(np.zeros((1, 2)), [0, 1], 3), "k=3 is larger than the number of training"),
    ],
)
def test_invalid_input_raises_input_error(call, match):
    with pytest.raises(InputError, match=match):
        call()


# ---------------------------------------------------------------------------
# the vectorised block path of infer_all and infer_rows: the same as the per-row functions
# ---------------------------------------------------------------------------


def per_row_reference(D, y, k, loss, classes, rows=None):
    """h*, S(h*), h^, S(h^), y^ of every row from the one-query functions on the other points."""
    n = y.size
    code = {c: r for r, c in enumerate(classes.tolist())}
    out = []
    for i in range(n) if rows is None else rows:
        others = np.delete(np.arange(n), i)
        h, s = correct_inference(D[i, others], y[others], y[i], k, classes=classes)
        hh, v, y_hat = loss_augmented_inference(D[i, others], y[others], y[i], k, loss=loss, classes=classes)
        out.append((others[h], s, others[hh], v - loss[code[y[i]], code[y_hat]], y_hat))
    h_star, s_star, h_hat, s_hat, y_hat = zip(*out)
    return np.array(h_star), np.array(s_star), np.array(h_hat), np.array(s_hat), np.array(y_hat)


def assert_same_as_reference(res, ref, loss, y):
    h_star, s_star, h_hat, s_hat, y_hat = ref
    assert np.array_equal(res.h_star, h_star) and np.array_equal(res.h_hat, h_hat)
    assert np.array_equal(res.y_hat, y_hat)
    np.testing.assert_allclose(res.score_star, s_star, rtol=1e-12, atol=0)
    np.testing.assert_allclose(res.score_hat, s_hat, rtol=1e-12, atol=0)
    code = {c: r for r, c in enumerate(res.classes.tolist())}
    assert np.array_equal(res.loss, [loss[code[a], code[b]] for a, b in zip(y.tolist(), res.y_hat.tolist())])


def random_problem(rng, n, n_classes, k, integer):
    """Labels with every class big enough for h* (or None), distances with many ties when integer."""
    for _ in range(100):
        y = rng.integers(0, n_classes, size=n)
        try:
            infer_all(np.zeros((n, n)), y, k, classes=np.arange(n_classes))
        except InputError:
            continue
        D = rng.integers(0, 5, size=(n, n)).astype(float) if integer else rng.random((n, n)) * 3
        return D, y
    return None, None


def test_infer_all_block_path_equals_the_per_row_functions():
    rng = np.random.default_rng(7)
    checked = collections.Counter()
    for case in range(100):
        n = int(rng.choice([6, 12, 20, 30]))
        n_classes = int(rng.integers(2, 7))
        k = int(rng.integers(1, min(11, n - 1) + 1))
        D, y = random_problem(rng, n, n_classes, k, integer=case % 2 == 0)
        if D is None:
            continue
        loss = [zero_one_loss(n_classes), rng.integers(0, 3, size=(n_classes, n_classes)).astype(float),
                rng.random((n_classes, n_classes))][case % 3]
        np.fill_diagonal(loss, 0.0)
        classes = np.arange(n_classes)
        res = infer_all(D, y, k, loss=loss, classes=classes, block_size=int(rng.integers(1, 9)))
        assert_same_as_reference(res, per_row_reference(D, y, k, loss, classes), loss, y)
        checked[k > n_classes, n_classes > k, bool(np.any(np.bincount(y, minlength=n_classes) <= k))] += 1
    # k above and below R, classes with at most k points (a padded shortlist), several cases of each
    assert len(checked) >= 4 and sum(checked.values()) > 70


@pytest.mark.parametrize("k", [3, 11])
def test_infer_all_block_path_many_classes_with_ties(k):
    # letter-like: 26 classes (more than k), small integer features, so many equal distances
    rng = np.random.default_rng(k)
    y = np.repeat(np.arange(26), 12)
    X = rng.integers(0, 4, size=(y.size, 5)).astype(float) + (y % 3)[:, None]
    D = metric_distances(X, np.eye(5))
    assert np.array_equal(D, ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))  # exact: integers
    loss = rng.integers(0, 3, size=(26, 26)).astype(float)
    np.fill_diagonal(loss, 0.0)
    res = infer_all(D, y, k, loss=loss)
    rows = rng.choice(y.size, size=30, replace=False)
    ref = per_row_reference(D, y, k, loss, res.classes, rows=rows)
    sub = InferenceResult(*(getattr(res, f.name)[rows] if f.name != "classes" else res.classes
                            for f in dataclasses.fields(res)))
    assert_same_as_reference(sub, ref, loss, y[rows])
    for b in (1, 37):
        other = infer_all(D, y, k, loss=loss, block_size=b)
        assert np.array_equal(other.h_star, res.h_star) and np.array_equal(other.h_hat, res.h_hat)
        assert np.array_equal(other.score_hat, res.score_hat) and np.array_equal(other.y_hat, res.y_hat)


def test_infer_all_with_a_class_without_points_and_string_labels():
    D, y = blobs(4, [8, 9, 7])
    labels = np.array(["a", "b", "c"])[y]
    classes = np.array(["c", "z", "a", "b"])  # "z" has no points; not sorted
    loss = np.array([[0, 1, 2, 1], [1, 0, 1, 1], [3, 1, 0, 1], [1, 2, 1, 0]], dtype=float)
    res = infer_all(D, labels, 4, loss=loss, classes=classes, block_size=5)
    assert_same_as_reference(res, per_row_reference(D, labels, 4, loss, classes), loss, labels)


def test_infer_rows_equals_infer_all_on_its_distances():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 5, size=150)
    X = rng.integers(-3, 4, size=(150, 4)).astype(float) + 100.0  # integers: exact distances, many ties
    W = rng.integers(-1, 2, size=(4, 4)).astype(float)
    W = W @ W.T + np.diag([2.0, 1.0, 2.0, 1.0])
    W[0, 1] += 1.0  # not symmetric: only the symmetric part counts
    D = metric_distances(X, W)
    diff = X[:, None, :] - X[None, :, :]
    assert np.array_equal(D, np.einsum("ijd,de,ije->ij", diff, W, diff))
    rows = np.array([5, 149, 0, 5, 77, 3])
    for k, inference in [(1, "exact"), (6, "exact"), (6, "paper")]:
        full = infer_all(D, y, k, inference=inference)
        part = infer_rows(X, W, rows, y, k, inference=inference, block_size=4)
        for f in dataclasses.fields(full):
            a, b = getattr(full, f.name), getattr(part, f.name)
            assert np.array_equal(a if f.name == "classes" else a[rows], b), f.name
    assert np.array_equal(metric_distances(X, W, rows=rows), D[rows])
    empty = infer_rows(X, W, np.array([], dtype=int), y, 3)
    assert empty.h_star.shape == (0, 3) and empty.surrogate.shape == (0,)


def test_infer_rows_real_valued_data_and_cancellation():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(120, 6)) + 1e3  # far from the origin: centred before the products
    y = rng.integers(0, 4, size=120)
    A = rng.normal(size=(6, 6))
    W = A @ A.T
    D = metric_distances(X, W)
    diff = X[:, None, :] - X[None, :, :]
    np.testing.assert_allclose(D, np.einsum("ijd,de,ije->ij", diff, W, diff), rtol=1e-9, atol=1e-9)
    full = infer_all(D, y, 5)
    rows = rng.permutation(120)[:50]
    part = infer_rows(X, W, rows, y, 5)
    assert np.array_equal(part.h_star, full.h_star[rows]) and np.array_equal(part.h_hat, full.h_hat[rows])
    np.testing.assert_allclose(part.score_hat, full.score_hat[rows], rtol=1e-12)


def test_infer_rows_too_small_class_and_invalid_input():
    D, y = blobs(2, [10, 10, 2])
    X = np.arange(44.0).reshape(22, 2)
    with pytest.raises(InputError, match="these classes are too small: 2 has 2 point"):
        infer_rows(X, np.eye(2), [0, 1], y, 5)
    with pytest.raises(InputError, match="rows contains 22, which is not the index"):
        infer_rows(X, np.eye(2), [0, 22], y, 1)
    with pytest.raises(InputError, match="rows contains -1"):
        infer_rows(X, np.eye(2), [-1], y, 1)
    with pytest.raises(InputError, match="rows must be a 1-D array of integer indices"):
        infer_rows(X, np.eye(2), [0.5], y, 1)
    with pytest.raises(InputError, match=r"W must have shape \(d, d\) = \(2, 2\)"):
        infer_rows(X, np.eye(3), [0], y, 1)
    with pytest.raises(InputError, match="W contains NaN"):
        metric_distances(X, [[1.0, np.nan], [0.0, 1.0]])
    with pytest.raises(InputError, match="k=22 is larger than the number of candidates"):
        infer_rows(X, np.eye(2), [0], y, 22)
