"""metricopt.datasets: loaders of the real data sets, SHA-256 checks, preprocessing, splits.

File-based tests read the shared data folder (``$METRICOPT_DATA``, else ``shared/data``
beside the checkout, else ``/work/shared/data``) and are skipped when none exists.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import metricopt.datasets as ds
from metricopt.errors import InputError, MetricoptError, UnknownOptionError
from metricopt.datasets import DATA_ENV, DatasetError


def _data_folder():
    candidates = []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]))
    candidates += [Path(__file__).resolve().parents[2] / "shared" / "data", Path("/work/shared/data")]
    for path in candidates:
        if path.is_dir():
            return path
    return None


@pytest.fixture(scope="module")
def data_dir():
    path = _data_folder()
    if path is None:
        pytest.skip("real data folder not found (set METRICOPT_DATA to the shared/data folder)")
    return path


_cache = {}


_BUILTIN = ("iris", "wine", "digits", "breast_cancer")


@pytest.fixture
def loaded():
    """Load a set once per test session (``loaded("orl")``); file sets skip without data."""

    def get(name):
        if name not in _cache:
            folder = None
            if name not in _BUILTIN:
                folder = _data_folder()
                if folder is None:
                    pytest.skip("real data folder not found (set METRICOPT_DATA to the shared/data folder)")
            _cache[name] = ds.load(name, folder)
        return _cache[name]

    return get


def _loo_1nn_accuracy(X, y):
    sq = np.einsum("ij,ij->i", X, X)
    D = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    np.fill_diagonal(D, np.inf)
    return float(np.mean(y[np.argmin(D, axis=1)] == y))


# --------------------------------------------------------------------------- loaders

EXPECTED = {
    # name: (shape, class sizes (sorted by label) or number of classes)
    "balance-scale": ((625, 4), [288, 49, 288]),
    "letter-recognition": ((20000, 16), 26),
    "orl": ((400, 1024), [10] * 40),
    "olivetti": ((400, 4096), [10] * 40),
    "yale-b": ((2414, 1024), 38),
    "usps": ((11000, 256), [1100] * 10),
    "mnist-5k": ((5000, 784), [500] * 10),
    "iris": ((150, 4), [50] * 3),
    "wine": ((178, 13), [59, 71, 48]),
    "digits": ((1797, 64), 10),
    "breast_cancer": ((569, 30), [212, 357]),
}


def test_datasets_lists_every_name():
    assert set(ds.DATASETS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shapes_dtypes_and_label_counts(name, loaded):
    X, y = loaded(name)
    shape, classes = EXPECTED[name]
    assert X.shape == shape and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.shape == (shape[0],) and y.dtype == np.int64
    counts = np.bincount(y)
    n_classes = classes if isinstance(classes, int) else len(classes)
    assert counts.shape == (n_classes,) and counts.min() > 0  # labels are exactly 0..C-1
    if not isinstance(classes, int):
        assert counts.tolist() == classes
    assert np.all(np.isfinite(X))


def test_builtin_sets_need_no_data_folder(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    X, y = ds.load("iris")
    assert X.shape == (150, 4)
    X2, _ = ds.load_wine(data_home="/no/such/folder")  # ignored for built-in sets
    assert X2.shape == (178, 13)


def test_yale_b_and_letter_class_sizes(loaded):
    _, y = loaded("yale-b")
    counts = np.bincount(y)
    assert counts.sum() == 2414 and counts.min() == 59 and counts.max() == 64
    _, y = loaded("letter-recognition")
    assert np.bincount(y).min() >= 700


def test_balance_scale_is_the_rule_generated_set_with_documented_labels(loaded):
    X, y = loaded("balance-scale")
    grid = np.array(list(itertools.product(range(1, 6), repeat=4)), dtype=float)
    assert np.array_equal(X, grid)
    torque = X[:, 0] * X[:, 1] - X[:, 2] * X[:, 3]
    assert np.array_equal(y, np.where(torque > 0, 0, np.where(torque < 0, 2, 1)))  # L=0, B=1, R=2


def test_label_mappings_of_file_sets(loaded):
    _, y = loaded("letter-recognition")
    assert y[0] == ord("T") - ord("A")  # the file starts with a 'T'
    _, y = loaded("olivetti")
    assert np.array_equal(y, np.arange(400) // 10)
    _, y = loaded("orl")
    assert np.array_equal(y, np.repeat(np.arange(40), 10))


def test_images_are_row_major_and_upright(loaded):
    # A face is roughly left-right symmetric, not top-bottom symmetric; a transposed face
    # would be the other way round.
    for name in ("orl", "olivetti", "yale-b"):
        X, _ = loaded(name)
        imgs = X.reshape(-1, *ds.IMAGE_SHAPES[name]).mean(axis=0)
        lr = np.abs(imgs - imgs[:, ::-1]).mean()
        tb = np.abs(imgs - imgs[::-1, :]).mean()
        assert lr < tb, name
    # Digits: a '1' is a tall stroke, so the ink of the mean '1' varies more from column to
    # column than from row to row; transposed images would show the opposite.
    for name in ("usps", "mnist-5k"):
        X, y = loaded(name)
        one = X[y == 1].reshape(-1, *ds.IMAGE_SHAPES[name]).mean(axis=0)
        assert one.sum(axis=0).std() > one.sum(axis=1).std(), name


@pytest.mark.parametrize(
    "name, expected", [("orl", 0.9475), ("olivetti", 0.945), ("yale-b", 0.775), ("mnist-5k", 0.944)]
)
def test_loo_1nn_sanity_values_from_the_readme(name, expected, loaded):
    X, y = loaded(name)
    assert _loo_1nn_accuracy(X, y) == pytest.approx(expected, abs=0.005)


def test_environment_variable_is_used(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    assert ds.data_home() == data_dir
    X, _ = ds.load_balance_scale()
    assert X.shape == (625, 4)
    assert ds.data_home(data_dir / "uci") == data_dir / "uci"  # the argument wins


# --------------------------------------------------------------------------- errors about files


def test_no_folder_given(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(DatasetError, match="data_home= was not passed") as info:
        ds.load_orl()
    assert DATA_ENV in str(info.value) and "uci/, faces/ and digits/" in str(info.value)
    assert isinstance(info.value, MetricoptError)


def test_missing_folder_names_the_path_and_the_variable(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError) as info:
        ds.load("usps", data_home=missing)
    msg = str(info.value)
    assert str(missing) in msg and DATA_ENV in msg and "data_home=" in msg
    monkeypatch.setenv(DATA_ENV, str(missing))
    with pytest.raises(DatasetError, match=re.escape(f"${DATA_ENV}")):
        ds.load_usps()


def test_missing_file_names_file_and_folder(tmp_path):
    (tmp_path / "faces").mkdir()
    with pytest.raises(DatasetError) as info:
        ds.load_olivetti(tmp_path)
    msg = str(info.value)
    assert "faces/olivettifaces.mat" in msg and str(tmp_path / "faces" / "olivettifaces.mat") in msg
    assert DATA_ENV in msg


def _copy(data_dir, tmp_path, relpath, with_sums=True):
    dest = tmp_path / relpath
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data_dir / relpath, dest)
    if with_sums:
        shutil.copyfile(data_dir / "SHA256SUMS", tmp_path / "SHA256SUMS")
    return dest


def _flip_byte(path, where=100):
    data = bytearray(path.read_bytes())
    data[where] ^= 0x01
    path.write_bytes(bytes(data))


def test_corrupt_file_fails_the_sha256_check(data_dir, tmp_path):
    dest = _copy(data_dir, tmp_path, "faces/ORL_32x32.mat")
    _flip_byte(dest, 5000)
    with pytest.raises(DatasetError, match="SHA-256") as info:
        ds.load_orl(tmp_path)
    msg = str(info.value)
    assert ds.FILES["faces/ORL_32x32.mat"][0] in msg and "expected" in msg and "got" in msg


def test_file_changed_after_a_successful_load_is_caught(data_dir, tmp_path):
    dest = _copy(data_dir, tmp_path, "uci/balance-scale.data")
    ds.load_balance_scale(tmp_path)
    _flip_byte(dest)
    st = dest.stat()
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))  # a new mtime, whatever the clock
    with pytest.raises(DatasetError, match="SHA-256"):
        ds.load_balance_scale(tmp_path)


def test_edited_sums_file_is_caught(data_dir, tmp_path):
    _copy(data_dir, tmp_path, "uci/balance-scale.data")
    sums = tmp_path / "SHA256SUMS"
    good = ds.FILES["uci/balance-scale.data"][0]
    bad = "0" * 64
    sums.write_text(sums.read_text().replace(good, bad))
    with pytest.raises(DatasetError, match="SHA256SUMS") as info:
        ds.load_balance_scale(tmp_path)
    assert f"expected {good}, got {bad}" in str(info.value)
    sums.write_text("")
    with pytest.raises(DatasetError, match="no SHA-256 sum for uci/balance-scale.data"):
        ds.load_balance_scale(tmp_path)


def test_matching_file_and_sums_of_other_data_are_caught(data_dir, tmp_path):
    dest = _copy(data_dir, tmp_path, "uci/balance-scale.data")
    _flip_byte(dest)
    import hashlib

    digest = hashlib.sha256(dest.read_bytes()).hexdigest()
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(ds.FILES["uci/balance-scale.data"][0], digest))
    with pytest.raises(DatasetError, match=f"SHA-256 .*got {digest}"):
        ds.load_balance_scale(tmp_path)


def test_without_sums_file_the_builtin_table_is_enough(data_dir, tmp_path):
    _copy(data_dir, tmp_path, "uci/balance-scale.data", with_sums=False)
    assert ds.load_balance_scale(tmp_path)[0].shape == (625, 4)


def test_verification_is_cached(data_dir, tmp_path, monkeypatch):
    _copy(data_dir, tmp_path, "uci/balance-scale.data")
    calls = []
    real = ds._sha256_of_file
    monkeypatch.setattr(ds, "_sha256_of_file", lambda p: calls.append(p) or real(p))
    ds.load_balance_scale(tmp_path)
    ds.load_balance_scale(tmp_path)
    ds.load("balance-scale", tmp_path)
    assert len(calls) == 1


# --------------------------------------------------------------------------- load() options


def test_unknown_name_lists_the_choices():
    with pytest.raises(UnknownOptionError) as info:
        ds.load("mnist")
    msg = str(info.value)
    assert msg.startswith("unknown data set 'mnist'; choose one of: 'iris', 'wine'")
    assert all(repr(n) in msg for n in ds.DATASETS)
    assert isinstance(info.value, ValueError)


def test_names_ignore_case_and_separator():
    X, _ = ds.load("Breast-Cancer")
    assert X.shape == (569, 30)


def test_standard_scaling():
    X, y = ds.load("wine", scale="standard")
    assert np.allclose(X.mean(axis=0), 0.0, atol=1e-12)
    assert np.allclose(X.var(axis=0), 1.0)
    assert np.array_equal(y, ds.load_wine()[1])


def test_minmax_scaling_and_constant_columns():
    X, _ = ds.load("digits", scale="minmax")
    raw, _ = ds.load_digits()
    const = raw.min(axis=0) == raw.max(axis=0)
    assert const.any()  # digits has blank pixels in every image
    assert X.min() == 0.0 and X.max() == 1.0
    assert np.all(X[:, const] == 0.0)
    assert np.allclose(X[:, ~const].min(axis=0), 0.0) and np.allclose(X[:, ~const].max(axis=0), 1.0)
    Xs, _ = ds.load("digits", scale="standard")
    assert np.all(Xs[:, const] == 0.0) and np.all(np.isfinite(Xs))


def test_pca_int_and_float():
    X, _ = ds.load("wine", scale="standard", pca=5)
    assert X.shape == (178, 5)
    from sklearn.decomposition import PCA

    Z, _ = ds.load("wine", scale="standard")
    total = Z.var(axis=0).sum()
    X, _ = ds.load("wine", scale="standard", pca=0.8)
    kept = X.var(axis=0).sum() / total
    assert kept >= 0.8
    ratios = np.cumsum(PCA().fit(Z).explained_variance_ratio_)
    assert X.shape[1] == int(np.searchsorted(ratios, 0.8) + 1)  # the fewest components that do it
    X2, _ = ds.load("wine", scale="standard", pca=0.8)
    assert np.array_equal(X, X2)  # deterministic


def test_preprocess_fits_on_train_only():
    X, y = ds.load_iris()
    train, test = next(ds.random_splits(y, n_splits=1))
    Xtr, Xte = ds.preprocess(X[train], X[test], scale="standard")
    mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
    assert np.allclose(Xtr.mean(axis=0), 0.0) and np.allclose(Xtr.std(axis=0), 1.0)
    assert np.allclose(Xte, (X[test] - mu) / sd)
    Xtr, Xte = ds.preprocess(X[train], X[test], scale="minmax", pca=2)
    assert Xtr.shape == (len(train), 2) and Xte.shape == (len(test), 2)
    Xtr2, none = ds.preprocess(X[train], scale="minmax", pca=2)
    assert none is None and np.allclose(Xtr2, Xtr)
    Xtr3, Xte3 = ds.preprocess(X[train], X[test])
    assert np.array_equal(Xtr3, X[train]) and np.array_equal(Xte3, X[test])


def test_bad_preprocessing_options():
    X, _ = ds.load_iris()
    expected = "unknown scale 'zscore'; choose one of: None, 'standard', 'minmax'."
    with pytest.raises(UnknownOptionError, match=re.escape(expected)):
        ds.load("iris", scale="zscore")
    with pytest.raises(UnknownOptionError, match="unknown scale"):
        ds.preprocess(X, scale=True)
    expected = "pca=5 dimensions is out of range; it must be between 1 and min(n_samples, n_features) = 4."
    with pytest.raises(InputError, match=re.escape(expected)):
        ds.preprocess(X, pca=5)
    with pytest.raises(InputError, match=re.escape("pca=0 dimensions is out of range")):
        ds.load("iris", pca=0)
    for bad in (1.0, 1.5, -0.2, 0.0):
        expected = f"pca as a float is the fraction of variance kept and must lie in (0, 1); got {bad!r}."
        with pytest.raises(InputError, match=re.escape(expected)):
            ds.preprocess(X, pca=bad)
    for bad in (True, "2"):
        with pytest.raises(InputError, match="pca must be None, an int"):
            ds.preprocess(X, pca=bad)
    with pytest.raises(InputError, match="X_test has 3 features but X_train has 4"):
        ds.preprocess(X, X[:, :3])
    with pytest.raises(InputError, match="X_train must be a numeric array"):
        ds.preprocess([["a", "b"]])


# --------------------------------------------------------------------------- splits


def _check_partition(train, test, n):
    assert train.dtype == np.int64 and test.dtype == np.int64
    assert np.intersect1d(train, test).size == 0
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))


def test_random_splits_are_deterministic_disjoint_and_stratified():
    _, y = ds.load_wine()
    a = list(ds.random_splits(y, n_splits=5, test_size=0.3, seed=3))
    b = list(ds.random_splits(y, n_splits=5, test_size=0.3, seed=3))
    c = list(ds.random_splits(y, n_splits=5, test_size=0.3, seed=4))
    assert len(a) == 5
    for (tr, te), (tr2, te2) in zip(a, b):
        assert np.array_equal(tr, tr2) and np.array_equal(te, te2)
        _check_partition(tr, te, len(y))
        assert len(te) == int(np.ceil(0.3 * len(y)))
        assert np.all(np.abs(np.bincount(y[te]) - 0.3 * np.bincount(y)) <= 1)
    assert not all(np.array_equal(x[1], z[1]) for x, z in zip(a, c))
    assert len({tuple(te) for _, te in a}) == 5  # the splits differ from each other
    assert len(list(ds.random_splits(y))) == 10


def test_per_class_splits_protocol():
    y = np.repeat(np.array([7, 3, 9]), [10, 12, 8])  # labels need not be 0..C-1
    splits = list(ds.per_class_splits(y, n_train=7, n_splits=4, seed=1))
    again = list(ds.per_class_splits(y, n_train=7, n_splits=4, seed=1))
    assert len(splits) == 4
    for (tr, te), (tr2, te2) in zip(splits, again):
        assert np.array_equal(tr, tr2) and np.array_equal(te, te2)
        _check_partition(tr, te, len(y))
        for c in (7, 3, 9):
            assert np.sum(y[tr] == c) == 7
    assert len({tuple(tr) for tr, _ in splits}) == 4


def test_per_class_splits_on_faces(loaded):
    _, y = loaded("orl")
    for tr, te in ds.per_class_splits(y, n_train=7, n_splits=2):
        assert np.all(np.bincount(y[tr]) == 7) and np.all(np.bincount(y[te]) == 3)


def test_validation_split():
    _, y = ds.load_iris()
    fit, val = ds.validation_split(y, fraction=0.2, seed=5)
    fit2, val2 = ds.validation_split(y, fraction=0.2, seed=5)
    assert np.array_equal(fit, fit2) and np.array_equal(val, val2)
    _check_partition(fit, val, len(y))
    assert np.bincount(y[val]).tolist() == [10, 10, 10]


def test_bad_split_arguments_have_clear_messages():
    y = np.repeat(np.arange(3), 5)
    msg = "test_size must be a fraction strictly between 0 and 1; got {!r}."
    for bad in (0, 1.0, 1.3, -0.1, 10, True, "0.3"):
        with pytest.raises(InputError, match=re.escape(msg.format(bad))):
            ds.random_splits(y, test_size=bad)  # raised at the call, before iterating
    for bad in (0, -1, 2.0, None, True):
        with pytest.raises(InputError, match=re.escape(f"n_splits must be an integer >= 1; got {bad!r}.")):
            ds.random_splits(y, n_splits=bad)
        with pytest.raises(InputError, match=re.escape(f"n_splits must be an integer >= 1; got {bad!r}.")):
            ds.per_class_splits(y, n_train=2, n_splits=bad)
    with pytest.raises(InputError, match=re.escape("fraction must be a fraction strictly between 0 and 1; got 0.")):
        ds.validation_split(y, fraction=0)
    with pytest.raises(InputError, match=re.escape("n_train must be an integer >= 1; got 0.")):
        ds.per_class_splits(y, n_train=0)
    with pytest.raises(
        InputError,
        match=re.escape(
            "per_class_splits with n_train=5 needs more than 5 samples in every class (to leave at least "
            "one for testing); these classes have too few: 0 (5), 1 (5), 2 (5)."
        ),
    ):
        ds.per_class_splits(y, n_train=5)
    with pytest.raises(InputError, match="at least 2 samples per class"):
        ds.random_splits(np.array([0, 0, 1]))
    with pytest.raises(InputError, match="at least one sample of each of the 3 classes on both sides"):
        ds.validation_split(y, fraction=0.1)
    with pytest.raises(InputError, match="non-empty 1-D array of labels"):
        ds.validation_split(np.zeros((3, 2)))


def test_model_file_preprocessing_matches_preprocess():
    from metricopt.io import Preprocessing

    X, y = ds.load_wine()
    train, test = next(ds.random_splits(y, n_splits=1))
    for scale, pca in [("standard", None), ("minmax", 3), ("standard", 0.9)]:
        Xtr, Xte = ds.preprocess(X[train], X[test], scale=scale, pca=pca)
        pre = Preprocessing(scale=scale, pca=pca).fit(X[train])
        for a, b in [(Xtr, pre.transform(X[train])), (Xte, pre.transform(X[test]))]:
            assert a.shape == b.shape
            # PCA directions are defined up to sign (solvers may differ)
            np.testing.assert_allclose(np.abs(a), np.abs(b), atol=1e-10)
    shift, width, model = ds.fit_scaling_pca(X[train], None, None)
    assert shift is None and width is None and model is None
