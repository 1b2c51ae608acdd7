"""The paper checks read against the papers (issue 33): revised claims, protocol differences, paper tables.

``make_results.py`` renders what this module holds into ``RESULTS.md``:

* :data:`REVISIONS`: every claim of a stored result whose verdict or wording changed because of the papers'
  own numbers (old claim as the run stored it, the claim the check now makes, its verdict on the stored
  measurement where that decides it, and the paper's location and numbers);
* :data:`PROTOCOL_DIFFERENCES`: for every check, how its protocol (as coded at this commit) differs from the
  paper's;
* :func:`paper_table_sections`: the results laid out as the papers' tables, with the rows no check runs.

Every paper number here is read from ``paper_numbers.csv`` (:mod:`paper_numbers`).
"""

from __future__ import annotations

from dataclasses import dataclass

import paper_numbers as P
from _common import EUCLIDEAN_ROW, GAIN_LABEL, KNOWN, KNOWN_MISMATCHES, LABEL, PAPER, PASS, not_below_what, paper_gain

T1 = P.jmlr
NOT_ASSERTED = "not asserted"


def _f(x):
    return f"{x:.2f}"


def _t1(row, column):
    return f"{_f(T1(row, column))} %"


def _sec42(dataset, what):
    return int(P.jmlr_text("Sec. 4.2", dataset, what))


# ----------------------------------------------------------------------------- revised claims


@dataclass(frozen=True)
class Revision:
    """One claim revised against the paper.

    ``old``: the assertion text a stored result holds; ``new``: the assertion the check now makes in its place
    (``None``: none, the claim is withdrawn or only its wording changed: then ``new == old``); ``verdict``: the
    new claim's outcome on the stored measurement (``PASS``, ``KNOWN MISMATCH``, :data:`NOT_ASSERTED`, or the
    same as before); ``paper``: the paper's location and numbers; ``why``: what changed.
    """

    check: str
    old: str
    new: str | None
    verdict: str
    paper: str
    why: str


def _gain_text(name, key, m, euclid_row="kNN Euclidean"):
    """An assertion text of the old faces check (gain against the paper's raw Euclidean row)."""
    return (f"{name}: {GAIN_LABEL[m]} below Euclidean kNN (paper: "
            f"{T1('LMNN PCA' if m == 'lmnn' else 'LMNN (energy)', key) - T1(euclid_row, key):+.2f} pp)")


def _faces_revisions():
    """The old faces check's gain claims (32x32 images, PCA 30 / 50, 10 splits, run of commit e4a2af6) and the claims
    of the check on the paper's protocol (38x31 pixels, 200 eigenfaces, early stopping on 30 % validation, 100
    splits) that replace them."""
    out = []
    ours = {"lmnn": "-5.06 pp (s.e. 0.25)", "energy": "-5.08 pp (s.e. 0.25)"}
    for d in (30, 50):
        for m in ("lmnn", "energy"):
            row = "LMNN PCA" if m == "lmnn" else "LMNN (energy)"
            out.append(Revision(
                "faces", _gain_text(f"faces PCA {d}", "faces", m),
                not_below_what("faces", GAIN_LABEL[m], "Euclidean kNN", paper_gain("faces", m)), KNOWN,
                f"JMLR 2009 Table 1, oFaces: {row} {_t1(row, 'oFaces')} against kNN PCA {_t1('kNN PCA', 'oFaces')}; "
                f"the old claim's baseline was kNN Euclidean {_t1('kNN Euclidean', 'oFaces')}, the row on the "
                f"paper's {T1('# features', 'oFaces'):.0f} eigenface inputs",
                "the gain was measured against the wrong row: our rows' Euclidean error is after PCA, and against "
                "the paper's PCA row the paper shows no gain; the check now asserts that (not significantly below), "
                f"on the paper's protocol (Sec. 4.2: {_sec42('Olivetti faces', 'image height (pixels)')}x"
                f"{_sec42('Olivetti faces', 'image width (pixels)')} pixels, {_sec42('Olivetti faces', 'eigenfaces')} "
                f"eigenfaces; Table 1: {T1('% validation', 'oFaces'):.0f} % validation, "
                f"{T1('# of train/test splits', 'oFaces'):.0f} splits), where ours is {ours[m]} below our Euclidean "
                "error after PCA (known mismatch: our Euclidean baseline is 3.6 times the paper's); the certified "
                "optimum on all training images (row 2, 8 splits) is not significantly below (passes)"))
    return out


def _table1_revisions():
    mmc = not_below_what("wine", "MMC", "Euclidean", T1("kNN MCC", "wine") - T1("kNN Euclidean", "wine"))
    nca = not_below_what("wine", "NCA", "Euclidean", T1("kNN NCA", "wine") - T1("kNN Euclidean", "wine"))
    out = [
        Revision("table1-baselines", "wine: MCC below Euclidean", mmc, KNOWN,
                 f"JMLR 2009 Sec. 4 cites Xing et al. (2002) for MCC; Table 1, wine: MCC {_t1('kNN MCC', 'wine')} "
                 f"against Euclidean {_t1('kNN Euclidean', 'wine')}",
                 "the paper's MCC is Xing et al.'s method (our MMC), not Globerson & Roweis's MLCC (the stored "
                 "'MCC' row), and the paper has it above Euclidean: the check now asserts MMC not significantly "
                 "below Euclidean, which the stored means (MMC 4.81 %, Euclidean 29.63 %, same 5 splits) do not "
                 "reproduce; MLCC has no Table 1 row and no claim"),
        Revision("table1-baselines", "wine: NCA below Euclidean", nca, PASS,
                 f"JMLR 2009 Table 1, wine: NCA {_t1('kNN NCA', 'wine')} against Euclidean "
                 f"{_t1('kNN Euclidean', 'wine')}",
                 "the paper has NCA above Euclidean; the stored run (-1.85 pp, s.e. 1.01) agrees with it: the former "
                 "known mismatch becomes a pass of the paper's own direction"),
    ]
    for col in ("bal", "oFaces", "yFaces"):
        d = T1("LMNN LDA", col) - T1("kNN LDA", col)
        out.append(Revision(
            "table1-baselines", f"{col}: LMNN on LDA inputs not above LDA alone",
            not_below_what(col, "LMNN on LDA inputs", "LDA alone", d), PASS if col == "bal" else KNOWN,
            f"JMLR 2009 Table 1, {col}: LMNN LDA {_t1('LMNN LDA', col)} against kNN LDA {_t1('kNN LDA', col)}"
            + ("; Sec. 4 calls LDA preprocessing drastically worse on the Olivetti faces" if col == "oFaces" else ""),
            "the paper has LMNN on LDA inputs above LDA alone here; the check now asserts that it is not "
            "significantly below, "
            + ("which the stored run (-0.11 pp, s.e. 0.13) passes" if col == "bal" else
               "which the stored run does not reproduce (known mismatch)")))
    out.append(Revision(
        "table1-baselines", "wine: RCA below Euclidean", "wine: RCA below Euclidean", KNOWN,
        f"JMLR 2009 Table 1, wine: RCA {_t1('kNN RCA', 'wine')} against Euclidean {_t1('kNN Euclidean', 'wine')}",
        "same claim and verdict; the reason said the paper's RCA number was not at hand: it is, and shows the gain"))
    return out


def _gerrymander_revisions():
    def t(k, m):
        return P.trivedi(k, m, "USPS")

    return [
        Revision("gerrymander-usps", "usps k=7: gerrymandering below LMNN (the paper's direction)", None, NOT_ASSERTED,
                 f"Trivedi et al. 2014 Table 1, USPS, k = 7: ours {P.printed('trivedi2014', 'Table 1', '7 / ours', 'USPS')}"
                 f" = LMNN {P.printed('trivedi2014', 'Table 1', '7 / LMNN', 'USPS')}",
                 "the paper prints a tie: no direction is asserted"),
        Revision("gerrymander-usps", "usps k=11: gerrymandering below LMNN (the paper's direction)",
                 not_below_what("usps z-scored k=11", "gerrymandering", "LMNN", t(11, "ours") - t(11, "LMNN")), KNOWN,
                 f"Trivedi et al. 2014 Table 1, USPS, k = 11: ours {_f(t(11, 'ours'))} % against LMNN "
                 f"{_f(t(11, 'LMNN'))} %",
                 "the paper has gerrymandering above LMNN at k = 11; the check now asserts not significantly below, "
                 "on the paper's preprocessing (z-scored, all 256 pixels, the standard partition's sizes; the run of "
                 "e4a2af6 had -0.45 pp on unscaled PCA-50 folds); the rerun does not reproduce it either (-2.57 pp, "
                 "s.e. 0.62, 2 splits: our time-limited LMNN is far from converged; known mismatch)"),
    ]


def _extension_revisions():
    def mm(col):
        return T1("LMNN (multiple metrics)", col), T1("LMNN PCA", col)

    iris, wine = mm("iris"), mm("wine")
    return [
        Revision("extensions", "iris: multi-metric LMNN kNN not significantly worse than single-metric LMNN kNN",
                 not_below_what("iris", "multi-metric LMNN kNN", "single-metric LMNN kNN", iris[0] - iris[1]), PASS,
                 f"JMLR 2009 Table 1, iris: multiple metrics {_f(iris[0])} % against LMNN PCA {_f(iris[1])} %",
                 "the paper has multi-metric LMNN above single-metric LMNN on iris; the stored run (-0.44 pp, s.e. "
                 "0.35) is not significantly below"),
        Revision("extensions", "wine: multi-metric LMNN kNN not significantly worse than single-metric LMNN kNN",
                 None, NOT_ASSERTED,
                 f"JMLR 2009 Table 1, wine: multiple metrics {_f(wine[0])} % = LMNN PCA {_f(wine[1])} %",
                 "the paper prints a tie: no direction is asserted"),
    ]


def _local_revisions():
    return [Revision(
        "local-usps", "USPS: LMNN Interp Train is at least LMNN lazy (Test)", None, NOT_ASSERTED,
        f"Ramanan & Baker Table III, Caltech (the set USPS stands for): Interp Train "
        f"{P.ramanan_baker('lmnn', 'Caltech', 'Interp Train')} % against lazy (Test) "
        f"{P.ramanan_baker('lmnn', 'Caltech', 'Test')} % (tables.md marks that block's reading tentative)",
        "the paper's Caltech rows do not show it: directions on a substitute set are asserted only where the "
        "paper's table for the set it stands for shows them")]


def _wording_revisions():
    bal_val = f"{T1('% validation', 'bal'):.0f} %"
    return [
        Revision("balance-scale", f"balance: LMNN kNN below Euclidean kNN (paper: {paper_gain('balance-scale', 'lmnn'):+.2f} pp)",
                 f"balance: LMNN kNN below Euclidean kNN (paper: {paper_gain('balance-scale', 'lmnn'):+.2f} pp)", KNOWN,
                 f"JMLR 2009 Table 1, bal: % validation {bal_val}",
                 "same claim and verdict; the reason said the paper's number came from an early-stopped solve, but "
                 "Table 1 lists no validation part for bal: the early-stopped row shows what stopping early does, "
                 "not the paper's protocol (reason revised in _common.KNOWN_MISMATCHES)"),
        Revision("faces", f"faces: Euclidean 3-NN on the raw pixels consistent with the paper's "
                 f"{_f(T1('kNN Euclidean', 'oFaces'))} %",
                 f"faces: Euclidean 3-NN on the {_sec42('Olivetti faces', 'image height (pixels)')}x"
                 f"{_sec42('Olivetti faces', 'image width (pixels)')} pixels consistent with the paper's "
                 f"{_f(T1('kNN Euclidean', 'oFaces'))} %", KNOWN,
                 f"JMLR 2009 Sec. 4.2 and Table 1 (oFaces, # features {T1('# features', 'oFaces'):.0f})",
                 "same claim and verdict, now on the paper's image size: the reason said the paper's image "
                 f"preprocessing was not known: Sec. 4.2 states it ({_sec42('Olivetti faces', 'image height (pixels)')}x"
                 f"{_sec42('Olivetti faces', 'image width (pixels)')} pixels, "
                 f"{_sec42('Olivetti faces', 'eigenfaces')} eigenfaces); ours on those pixels 10.00 % (s.e. 0.27, "
                 "100 splits), on the 200 eigenfaces 10.05 %"),
        Revision("gerrymander-usps", "usps k=3: gerrymandering below LMNN (the paper's direction)",
                 "usps z-scored k=3: gerrymandering below LMNN (the paper's direction)", KNOWN,
                 f"Trivedi et al. 2014 Table 1, USPS, k = 3: ours {_f(P.trivedi(3, 'ours', 'USPS'))} % against LMNN "
                 f"{_f(P.trivedi(3, 'LMNN', 'USPS'))} %",
                 "same claim (the paper's direction at k = 3), now on the paper's preprocessing (z-scored, all 256 "
                 "pixels, the standard partition's sizes); still a known mismatch: the rerun has gerrymandering "
                 "+0.27 pp (s.e. 0.12, 2 splits) above LMNN (the e4a2af6 run: -0.23 pp, s.e. 0.23, on unscaled "
                 "PCA-50 folds)"),
        Revision("nca-fig1", "wine: rank-2 NCA test error not above rank-2 LDA's",
                 "wine: rank-2 NCA test error not above rank-2 LDA's", KNOWN,
                 "Goldberger et al. 2004, Fig. 1 (bars only) and Sec. 4 (rank-2 NCA consistently superior)",
                 "same claim and verdict; the paper's bars are not in its text, which the reason now says"),
        Revision("local-mnist", "MNIST-5k: hybrid Test: re-ranking a shortlist of 20 beats a shortlist of k = 3",
                 "MNIST-5k: hybrid Test: re-ranking a shortlist of 20 beats a shortlist of k = 3", KNOWN,
                 f"Ramanan & Baker Table IV, Sampled MNIST: Hybrid lazy (Test) "
                 f"{P.ramanan_baker('hybrid', 'Sampled MNIST', 'Test')} % against Global "
                 f"{P.ramanan_baker('hybrid', 'Sampled MNIST', 'Global')} %",
                 "same claim and verdict; its ground is the paper's MNIST table (every swept cell beats Global; "
                 "a shortlist of k = 3 is the global 3-NN), not Fig. 6 (MultiPIE, no numbers in the text)"),
    ]


#: every revised claim (see :class:`Revision`)
REVISIONS = (_faces_revisions() + _table1_revisions() + _gerrymander_revisions() + _extension_revisions()
             + _local_revisions() + _wording_revisions())

def _note_revisions():
    mp_bal = (T1("LMNN PCA", "bal"), T1("LMNN (multiple passes)", "bal"))
    mm_y = (T1("LMNN PCA", "yFaces"), T1("LMNN (multiple metrics)", "yFaces"))
    return [
        ("every LMNN check, make_results.py", "the error table cited as \"the test-error table of Section 6\"",
         "Table 1 (Section 4); Section 6 is about ball trees"),
        ("iris, wine, balance-scale, faces", "titles and docstrings cite \"NIPS 2005 Table 1\" for the rows",
         "NIPS 2005's Table 1 has data sizes only (other sizes than JMLR 2009's) and its error bars (Fig. 2) are not "
         "assignable in the text copy: the checks now cite JMLR 2009 Table 1 alone"),
        ("_common.py", "\"k = 3 and mu = 0.5 as in the papers\"",
         "as in JMLR 2009 (Sec. 4); NIPS 2005 set k and mu by cross validation (Sec. 3)"),
        ("table1-baselines", "\"MCC\" run as Globerson & Roweis's MLCC, and the paper's numbers said not to be at "
         "hand", "JMLR 2009 Sec. 4 cites Xing et al. (2002) for MCC: the paper's MCC column is our MMC row, MLCC has no "
         "Table 1 row; every Table 1 number of the baseline rows is now shown beside ours"),
        ("extensions", "the paper's multi-pass and multi-metric figures \"not at hand\", its gains called small",
         f"Table 1 has them: e.g. multiple passes on bal {_f(mp_bal[0])} -> {_f(mp_bal[1])} %, multiple metrics on "
         f"yFaces {_f(mm_y[0])} -> {_f(mm_y[1])} %; the notes now quote the rows of iris, wine and bal"),
        ("extensions", "\"the same splits as test_paper_uci.py\"",
         "test_paper_uci.py draws the paper's subsample sizes; the extensions run on the full sets"),
        ("dimred", "\"the paper's Section 5.4 numbers are not at hand\"",
         "Section 5.4 describes the methods; the results are in Section 6.3 (Fig. 13, MNIST), whose text gives "
         "LMNN-R's errors at two ranks and the baseline (now quoted, not compared: other data)"),
        ("faces, yale-b", "the protocols quoted \"as issue 16 quotes it\" from \"Sec. 6\"",
         "JMLR 2009 Sec. 4.2 states both protocols (read from the source table)"),
        ("balance-scale", "the paper's LMNN number said to come from an early-stopped solve",
         f"Table 1 lists {T1('% validation', 'bal'):.0f} % validation for bal"),
        ("gerrymander", "\"the paper: its SGD, Algorithm 1, with greedy inference\"",
         "the paper's inference is exact (Algorithms 2 and 3; the greedy steps of Algorithm 2 are proved optimal)"),
        ("nca-fig1", "\"asserts the directions the figure shows\"; balance called \"the set where the figure's gain "
         "is largest\"", "the text copy has no bar values: the directions are those of the paper's text (Sec. 4), "
         "two asserted in a stronger form, which the docstring now says"),
        ("local-*", "the shortlist sweep tied to Fig. 6 (\"not at hand\")",
         "Fig. 6 is MultiPIE's and has no numbers in the text; the sweep's directions follow from the MNIST rows of "
         "Tables II-IV (every swept cell beats Global there)"),
    ]


#: claims of the checks' notes and docstrings (not assertions) corrected against the papers: (where, old, new)
NOTE_REVISIONS = _note_revisions()

#: new claims the checks make that no stored run holds (their verdict on the stored measurement, and why)
NEW_CLAIMS = [
    Revision("faces", "", f"faces{r}: Euclidean 3-NN error consistent with the paper's {_f(PAPER['faces']['euclidean'])} %",
             KNOWN, f"JMLR 2009 Table 1, oFaces, kNN PCA {_t1('kNN PCA', 'oFaces')}",
             f"the rows' Euclidean error after PCA is now compared with the paper's PCA row (the old rows' stored "
             f"12.42 % and 11.25 % at PCA 30 / 50 were not); on the paper's protocol: {ours} (known mismatch)")
    for r, ours in (("", "10.05 % (s.e. 0.27, 100 splits)"), (" certified", "11.04 % (s.e. 1.11, 8 splits)"))
]


def by_old_text(check, text):
    """The revision of the stored assertion ``text`` of ``check`` (identity runs share their check's), or None."""
    base = check[: -len("-identity")] if check.endswith("-identity") else check
    for r in REVISIONS:
        if r.check == base and r.old == text:
            return r
    return None


def _consistent():
    """Every revised claim whose verdict is a known mismatch has its reason; a passing one has none."""
    for r in REVISIONS + NEW_CLAIMS:
        if r.new is None:
            continue
        if r.verdict == KNOWN:
            assert r.new in KNOWN_MISMATCHES, r.new
        elif r.verdict == PASS:
            assert r.new not in KNOWN_MISMATCHES, r.new


# ----------------------------------------------------------------------------- paper columns of stored results

#: the LMNN checks' data-set names in their result rows -> the check key of ``_common.PAPER``
_ROW_KEY = {"iris": "iris", "wine": "wine", "balance-scale": "balance-scale", "ORL faces": "faces",
            "letter-recognition": "letter-recognition", "Extended Yale B": "yale-b"}


def paper_for_row(row):
    """The paper's numbers of a stored LMNN row, from the source table (``None`` where the row had none)."""
    if row.get("paper") is None:
        return None
    key = _ROW_KEY.get(row["dataset"])
    return None if key is None else PAPER[key]


#: the Table 1 row of each method of the baselines check (the stored "MCC" row is MLCC)
TABLE1_ROW = {"Euclidean": "kNN Euclidean", "PCA": "kNN PCA", "LDA": "kNN LDA", "RCA": "kNN RCA", "MMC": "kNN MCC",
              "NCA": "kNN NCA", "LMNN on LDA inputs": "LMNN LDA", "SVM": "multiclass SVM"}
_GERRY_ROW = {"euclidean": "Euclidean", "lmnn": "LMNN", "nca": "1-NCA", "gerrymander": "ours"}
_GERRY_COLUMN = {"letter-recognition": "letters", "usps": "USPS"}


def retro_paper_cell(check, table, method):
    """The paper cell of a stored method table's row, from the source table (``None``: keep the stored cell)."""
    base = check[: -len("-identity")] if check.endswith("-identity") else check
    if base == "table1-baselines":
        if method in ("MCC", "MLCC"):
            return "no row (the stored 'MCC' row is MLCC; the paper's MCC is our MMC)" if method == "MCC" else \
                "no row (MLCC is not in Table 1)"
        v = T1(TABLE1_ROW[method], table["dataset"])
        return "N/A" if v is None else _f(v)
    if base in ("gerrymander", "gerrymander-usps"):
        k = int(table["title"].rsplit("k = ", 1)[1])
        v = P.trivedi(k, _GERRY_ROW[method], _GERRY_COLUMN[table["dataset"]])
        return _f(v) + (" (Table 1; other data, not compared)" if base == "gerrymander-usps" else "")
    return None


# ----------------------------------------------------------------------------- protocol differences


def _protocol_differences():
    _usps_lmnn_s = P.value("trivedi2014", "App. B", "LMNN training time (s; one fold at k = 7)", "USPS")
    iris, wine, bal = ({k: T1(k, c) for k in ("# inputs", "# training examples", "# testing examples",
                                               "% validation", "# of train/test splits")} for c in ("iris", "wine", "bal"))
    tie_rule = ("kNN votes: every point tied in distance with the 3rd votes, whole tie groups dropped on a tied vote "
                "(the paper drops one neighbour at a time, Sec. 4; the index rule, which does that, is reported beside)")
    exact = "LMNN solved to its certified optimum (the paper: its sub-gradient solver, Appendix A; stopping not stated)"
    h, w = (_sec42("Olivetti faces", f"image {x} (pixels)") for x in ("height", "width"))
    eig = _sec42("Olivetti faces", "eigenfaces")
    ypc, ydrop = _sec42("Yale B", "principal components"), _sec42("Yale B", "leading eigenvectors discarded")
    return {
        "iris": ("JMLR 2009 Table 1, iris", [
            f"subset: a random stratified {iris['# inputs']:.0f}-point subsample of UCI's 150 per split (the paper's "
            "subset is not known)",
            f"validation: row 1 trains on all {iris['# training examples']:.0f} training points; row 2 stops the JAX "
            f"solve early on the paper's {iris['% validation']:.0f} % (the paper does not say how it used it); "
            "row 2 has 40 splits", exact, tie_rule]),
        "wine": ("JMLR 2009 Table 1, wine", [
            f"subset: a random stratified {wine['# inputs']:.0f}-point subsample of UCI's 178 per split",
            f"splits: 25 unscaled (Clarabel) against the paper's {wine['# of train/test splits']:.0f}",
            "the z-scored row has no paper counterpart", exact, tie_rule]),
        "balance-scale": ("JMLR 2009 Table 1, bal", [
            f"subset: a random stratified 536-point subsample of UCI's 625 (Table 1: {bal['# inputs']:.0f} inputs, "
            f"{bal['# training examples']:.0f} + {bal['# testing examples']:.0f} examples)",
            f"row 2 stops the JAX solve early on a 30 % validation part, where Table 1 lists "
            f"{bal['% validation']:.0f} % (not the paper's protocol); 40 splits", exact, tie_rule]),
        "faces": ("JMLR 2009 Table 1, oFaces (Sec. 4.2)", [
            f"images: the 64x64 Olivetti file (olivettifaces.mat) area-averaged to {h}x{w}; the paper downsampled the "
            "AT&T images by a method it does not state",
            f"eigenfaces: {eig}, fitted on each split's training images (the paper does not say on which images)",
            f"validation: {T1('% validation', 'oFaces'):.0f} % of the training images (stratified) held out and the "
            "JAX solve on the other 70 % stopped at the lowest validation 3-NN error, patience 10 re-checks; the "
            "paper states early stopping for Yale B (Sec. 4.2), not its rule for oFaces, and uses its sub-gradient "
            "solver (Appendix A); the kNN and energy rules then use all training images (not stated in the paper)",
            f"splits: {T1('# of train/test splits', 'oFaces'):.0f} as in Table 1 (7 training, 3 test images per "
            "subject as in Sec. 4.2); the second row (certified optimum on all training images, no validation) is "
            "ours, 8 splits",
            "certificates: the restricted dual's CVXPY program is skipped at d = 200 (it exceeds the machine's 23 GB); "
            "the early-stopped solves' gaps are reported, not asserted",
            f"our Euclidean error after PCA is 10.05 % against the paper's PCA row, {_t1('kNN PCA', 'oFaces')}; the "
            f"paper's Euclidean row ({_t1('kNN Euclidean', 'oFaces')}) is compared with our {h}x{w} pixels (10.00 %)",
            tie_rule]),
        "extensions-faces": ("JMLR 2009 Table 1, oFaces, row MP (Sec. 5.1)", [
            "the faces check's protocol (see faces): 38x31 images area-averaged from the 64x64 file, 200 eigenfaces, "
            "early stopping on 30 % validation",
            f"splits: 80 (the first 80 of the faces check's) against {T1('# of train/test splits', 'oFaces'):.0f}",
            "2 passes (the paper does not give its number), each stopped early on the same validation part",
            "multi-metric (row MM) not run: one split's joint program at d = 200 (40 metrics) ran past its time limit "
            "to 5.5 minutes and 8 GB", tie_rule]),
        "letter-extensions": ("JMLR 2009 Table 1, letters, rows MP and MM (Secs. 5.1, 5.2)", [
            "the letter check's splits (random stratified 14,000 / 6,000, seed 0), raw features",
            f"2 passes on 10 splits as the paper's {T1('# of train/test splits', 'letters'):.0f} (the paper does not "
            "give its number of passes); each pass on the JAX backend to a certified gap of 1e-3",
            "multi-metric: 1 split only, time-limited (1,800 s) and not certified (gap 3.7e-3); from the identity, not "
            "the paper's single-metric start; no validation part",
            "no energy rule and no training leave-one-out errors", tie_rule]),
        "yale-extensions": ("JMLR 2009 Table 1, yFaces, row MP (Sec. 5.1)", [
            f"the Yale B check's protocol (see yale-b): 32x32 images, 50 principal components after dropping the "
            f"leading {ydrop} (the paper: {ypc}), no validation part (the paper: "
            f"{_sec42('Yale B', 'validation % of the training data')} % with early stopping)",
            f"splits: 80 (the first of them the Yale B check's) against "
            f"{T1('# of train/test splits', 'yFaces'):.0f}",
            "2 passes (the paper does not give its number), each on the JAX backend (tol 1e-3) within the Yale B "
            "check's 600 s a solve, its certified gap asserted <= 0.1 (max 9.9e-4; all 160 passes optimal)",
            "multi-metric (row MM) not run: one split's joint program (38 metrics of 50 x 50) made no iteration within "
            "a 300 s limit (570 s per iteration estimated, 11.4 GB)",
            "no energy rule and no training leave-one-out errors", tie_rule]),
        "letter-recognition": ("JMLR 2009 Table 1, letters", [
            f"splits: 3 against the paper's {T1('# of train/test splits', 'letters'):.0f}",
            "LMNN on the JAX backend to a certified gap of 1e-3", tie_rule]),
        "yale-b": ("JMLR 2009 Table 1, yFaces (Sec. 4.2)", [
            f"images: 32x32 (1,024 pixels) against the paper's {T1('# features', 'yFaces'):.0f}",
            f"dimension: 50 principal components after dropping the leading {ydrop}, against the paper's {ypc} "
            f"(Table 1: {T1('# reduced dimensions', 'yFaces'):.0f})",
            f"test images: the rest of each subject (14-19) against the paper's "
            f"{_sec42('Yale B', 'test images per subject')}",
            f"validation: none against the paper's {_sec42('Yale B', 'validation % of the training data')} % with "
            "early stopping",
            f"splits: 1 against {_sec42('Yale B', 'runs of 70/30 splits')}; the solve is time-limited (600 s)"]),
        "yale-b-sec42": ("JMLR 2009 Table 1, yFaces (the protocol of Sec. 4.2)", [
            f"images: 32x32 (1,024 pixels) against the paper's {T1('# features', 'yFaces'):.0f}",
            f"test images: the rest of each subject (14-19; the paper: {_sec42('Yale B', 'test images per subject')}, "
            "fewer for the few subjects with fewer images)",
            f"early stop: the lowest validation 3-NN error of the JAX iterates (patience 10 re-checks) on a stratified "
            f"{_sec42('Yale B', 'validation % of the training data')} % of the training images; the paper's "
            "sub-gradient solver and its stopping rule beyond 'the lowest validation error' are not stated",
            "the Euclidean error on the pixels reported, not compared (other images)"]),
        "mnist-5k": ("JMLR 2009 Table 1, mnist (reduced; not compared)", [
            f"data: the 5,000-image subset, 3,500 training images against {T1('# training examples', 'mnist'):.0f}",
            "images not deskewed (the paper deskewed them)",
            f"dimension: PCA 50 against {T1('# reduced dimensions', 'mnist'):.0f}",
            "splits: 2 random 70/30 against the standard partition"]),
        "mnist-extensions": ("JMLR 2009 Table 1, mnist, row MP (Sec. 5.1; reduced: shown beside ours, not compared)", [
            f"the MNIST-5k check's protocol (see mnist-5k): the 5,000-image subset, 3,500 training images against "
            f"{T1('# training examples', 'mnist'):.0f}, not deskewed, PCA 50 against "
            f"{T1('# reduced dimensions', 'mnist'):.0f}",
            f"splits: 60 random 70/30 (the first 2 the MNIST-5k check's) against "
            f"{T1('# of train/test splits', 'mnist'):.0f} (the standard partition)",
            "2 passes (the paper does not give its number), each on the JAX backend (tol 1e-3) within the MNIST-5k "
            "check's 600 s a solve, its certified gap asserted <= 0.1 (max 9.5e-4; all 120 passes optimal)",
            "multi-metric (row MM) not run (not attempted: its lifted program holds a dense 35,000 x 500 array)",
            "no energy rule and no training leave-one-out errors", tie_rule]),
        "dimred": ("JMLR 2009 Sec. 6.3, Fig. 13 (MNIST; not compared)", [
            f"data: ORL faces at PCA 50 against MNIST at {P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'principal components before training'):.0f} "
            "principal components",
            f"ranks 5, 10, 20 against {P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'smallest rank r of LMNN-R'):.0f}-"
            f"{P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'largest rank r of LMNN-R'):.0f}",
            "LDA is an extra row (not in Fig. 13); 3 splits"]),
        "dimred-mnist": ("JMLR 2009 Sec. 6.3, Fig. 13 (MNIST; reduced: shown beside ours, not compared)", [
            "data: the 5,000-image subset, random 70/30 splits (3,500 / 1,500) against the standard partition "
            f"({T1('# training examples', 'mnist'):.0f} training images)",
            f"dimension before training: PCA 50 against {P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'principal components before training'):.0f} "
            "principal components (LMNN-S truncates a 50 x 50 metric, LMNN-R learns r x 50)",
            f"ranks 15, 25 against {P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'smallest rank r of LMNN-R'):.0f}-"
            f"{P.jmlr_text('Sec. 6.3', 'MNIST (Fig. 13)', 'largest rank r of LMNN-R'):.0f}",
            "LMNN-R: trust-region Newton on a smoothed hinge, 3 restarts, time-limited (300 s a fit), against "
            "the paper's sub-gradient method; LMNN-S truncates a certified convex solve (JAX, gap 1e-3)",
            "baseline: Euclidean 3-NN on the subset's raw pixels", "tie-inclusive kNN votes",
            "ball-tree speed-ups not measured", "2 splits"]),
        "extensions": ("JMLR 2009 Table 1, rows MP and MM (Secs. 5.1, 5.2)", [
            "data: the full UCI sets (150 / 178 / 625) on random 70/30 splits, not the paper's subsets",
            "wine z-scored (the paper's wine is unscaled)",
            "2 passes (the paper does not give its number)",
            f"multi-metric: no validation part (the paper held out {P.jmlr_text('Sec. 5.2', 'multi-metric LMNN', 'validation % of the training examples'):.0f} %) "
            "and no start from the single-metric solution (the exact solve needs none)",
            f"splits: 20 / 5 / 20 against {T1('# of train/test splits', 'iris'):.0f}", tie_rule]),
        "nca-fig1": ("Goldberger et al. 2004, Fig. 1 (bars only; not compared)", [
            "ionosphere and housing not run (not in the data folder)",
            f"USPS: 3 splits against {P.value('nca2004', 'Fig. 1', 'all panels', 'realizations (random splits)'):.0f}; "
            "the paper's USPS images are not described for Fig. 1 (ours: 16x16, pixels / 255)",
            "K = 1 for the square panels too (the paper states K = 1 for the rank-2 panels only)",
            "UCI features z-scored (not stated in the paper); NCA started from the PCA rotation (not stated)"]),
        "table1-baselines": ("JMLR 2009 Table 1, baseline rows", [
            "data: the full UCI sets on random 70/30 splits (the paper's subsets: see iris, wine, bal)",
            f"splits: 10 / 5 / 10 / 3 / 1 / 1 / 2 against the paper's 100 (letters {T1('# of train/test splits', 'letters'):.0f}, "
            f"yFaces {T1('# of train/test splits', 'yFaces'):.0f})",
            "PCA keeps 95 % of the variance, where the paper's PCA row equals its Euclidean row on iris, wine, bal and "
            "letters (no reduction)",
            f"oFaces: the 64x64 Olivetti images at PCA 30 against {h}x{w} images at {eig} eigenfaces",
            f"yFaces: one random 70/30 split of the 32x32 images at PCA 50, without dropping the leading {ydrop} "
            f"components, against {_sec42('Yale B', 'training images per subject')} training images per subject "
            f"at {ypc} components",
            "letters: the learned methods fitted on a 3,000-point subset",
            f"mnist (reduced: shown, not compared): the 5,000-image subset, not deskewed, PCA 50 against "
            f"{T1('# reduced dimensions', 'mnist'):.0f}, 2 random 70/30 splits against the standard partition, the "
            "learned methods fitted on a 1,000-point subset",
            "MMC, NCA, RCA: this package's implementations (the paper: the authors' code)",
            "SVM: RBF SVC, one-vs-one (the paper: Crammer-Singer, kernel chosen by cross validation)"]),
        "gerrymander": ("Trivedi et al. 2014 Table 1, letters", [
            f"folds: 2 of {P.value('trivedi2014', 'Sec. 6', 'five of the seven sets', 'cross-validation folds'):.0f}",
            "C tuned once per k on fold 1 (the paper: per fold, on a 75/25 split of the training portion)",
            "gerrymandering: Pegasos-style SGD for 4 epochs from the identity (the paper: its SGD until the running "
            "surrogate loss stops falling, started from a ReliefF diagonal or zeros)",
            "LMNN with mu = 0.5 and a time limit (the paper tuned every method's parameters, authors' code)",
            "1-NCA: this package's full-rank NCA on a 3,000-point subsample (the paper: the authors' code)"]),
        "gerrymander-usps": ("Trivedi et al. 2014 Table 1, USPS (directions only)", [
            f"data: the 11,000-image file (1,100 per digit), not the standard partition "
            f"(N = {P.value('trivedi2014', 'Table 1 (data rows)', 'USPS', 'N (images; the standard train/test partition)'):.0f}): "
            "2 stratified random splits of that partition's sizes (7,291 / 2,007) drawn from it, against the paper's "
            "one standard split; so the paper's numbers are shown, not compared",
            "features as the paper's: the 256 pixels z-scored on the training part, no PCA",
            f"our Euclidean errors 5.08 / 5.26 / 5.98 % at k = 3 / 7 / 11 (2 splits) against the paper's "
            f"{_f(P.trivedi(3, 'Euclidean', 'USPS'))} / {_f(P.trivedi(7, 'Euclidean', 'USPS'))} / "
            f"{_f(P.trivedi(11, 'Euclidean', 'USPS'))} % (the earlier unscaled PCA-50 folds of 8,800 training "
            "images gave about 3 %)",
            "C tuned once per k on split 1's 75/25 split over {1e-4, 1e-3} (the paper: its grid not stated)",
            "LMNN (mu = 0.5) stopped at 120 s per k (status time_limit, far from converged at 256 dimensions; the "
            f"paper: authors' code, parameters tuned; {_usps_lmnn_s:.0f} s for one fold at k = 7 on 12 cores, "
            "Appendix B)",
            "1-NCA: this package's full-rank NCA on a 1,500-point subsample",
            "gerrymandering: Pegasos-style SGD for 4 epochs from the identity (the paper: ReliefF diagonal or zeros; "
            "a zeros start left our 4-epoch SGD at the zero metric, 90 % test error, on a trial split)"]),
        "gerrymander-table3": ("Trivedi et al. 2014 Table 3 (no feature scaling), letters", [
            f"folds: 3 of {P.value('trivedi2014', 'Sec. 6', 'five of the seven sets', 'cross-validation folds'):.0f}",
            "C tuned once per k on fold 1's 75/25 split over {1e-4, 1e-3} (the paper: per fold, grid not stated)",
            "gerrymandering: Pegasos-style SGD for 4 epochs from the identity (the paper: its SGD until the running "
            "surrogate loss stops falling, started from a ReliefF diagonal or zeros)",
            "LMNN with mu = 0.5 stopped at 90 s per k (the paper tuned every method's parameters, authors' code)",
            "1-NCA: this package's full-rank NCA on a 1,500-point subsample, compared with Table 3's NCA row (which "
            "does not say 1-NCA or k-NCA)",
            "LMNN reached its certified optimum at k = 3 and stopped at the 90 s limit at k = 7 and 11 "
            "(time_limit on every fold)",
            "the paper's Table 3 reports mean and standard deviation over its 5 folds; ours: mean and standard error "
            "over 3"]),
        "local-mnist": ("Ramanan & Baker Tables II-IV, Sampled MNIST", [
            "data: one batch resampled from the 5,000-image subset against the paper's "
            f"{P.value('ramanan-baker', 'Sec. III-A', 'MNIST', 'batches'):.0f} batches sub-sampled from MNIST",
            "PCA to 95 % of the batch's variance (the paper: 164 components of the full set)",
            "local LMNN with 150 iterations, uncertified; per-class LMNN stopped at 200 iterations (the paper: the "
            "authors' LMNN code)", "the Train cell's metrics computed offline (the same metrics as the paper's "
            "online per-exemplar cell)"]),
        "local-yale-b": ("Ramanan & Baker Tables II-IV, MultiPIE (substitute)", [
            "data: Extended Yale B stands for MultiPIE (not available): one batch of 600 + 600",
            "per-class LMNN in the Eq. 8 form, 150 iterations per class"]),
        "local-usps": ("Ramanan & Baker Tables II-IV, Caltech 101 (substitute)", [
            "data: USPS digits stand for Caltech 101 (not available); 5 disjoint stratified batches of 1,000 + "
            "1,000 (10,000 of the 11,000 images) against the paper's "
            f"{P.value('ramanan-baker', 'Sec. III-A', 'MNIST', 'batches'):.0f} batches of "
            f"{P.value('ramanan-baker', 'Sec. III-A', 'MNIST', 'examples per batch'):.0f} (Sec. III-A, MNIST; its "
            "Caltech protocol, a fixed number of training images per class, has no counterpart on 10 digits)",
            "training and test parts drawn from one pool (the USPS file has no partition; the paper sub-samples "
            "MNIST's own training and test sets); mean +- standard error over the batches (the paper: standard "
            "deviations, Sec. III-B)",
            "reduced for time (5 batches in about 45 min on one core): local LMNN 30 iterations, uncertified; joint "
            "per-class LMNN 10 iterations from its default start (far from optimal, status iteration_limit)"]),
        "jmlr-fig2-zebra": ("JMLR 2009 Fig. 2 and Sec. 3.3 (directions only: the figure gives no error rates)", [
            f"data: our zebra stripes, n = {P.jmlr_text('Fig. 2', 'zebra stripes', 'data points n'):.0f} as in the "
            "text; stripe count and width, mode size and offset are ours (not stated)",
            "a random 1,000/1,000 train/test split per seed, 1-NN test error (the paper does not say whether its "
            "1-NN error is a training or a test error)", "5 seeds",
            "this package's LDA, RCA, MMC (the paper's MCC, Xing et al.), NCA and LMNN; MMC and LMNN on the JAX "
            "backend (the paper does not say whose code drew Fig. 2)", "PCA reported, not asserted (the text does not name it)"]),
        "jmlr-fig7-circles": ("JMLR 2009 Fig. 7 and Sec. 5.2", [
            "data: 40 + 40 points on two concentric circles at the same nominal angles (jittered), radial gap 0.8 of "
            "the spacing, so that Euclidean 1-NN LOO error is 100 %; the paper's points, radii and sampling are not "
            "given", "LMNN's k = 3 target neighbours and mu = 0.5 (Sec. 4's setting; Sec. 5.2 does not state them); "
            "exact solve", "tie-inclusive 1-NN LOO rule", "12 seeds (the paper: one data set)"]),
        "nca-fig2": ("Goldberger et al. 2004, Fig. 2 and Sec. 4 (figure only: no numbers)", [
            "separation measured as the training LOO 1-NN error of the 2-D projection (the paper shows the projected "
            "points)", "faces not run (not in the data folder)",
            "rings: 5 x 100 points, radii 1-5, noise s.d. 3 in the third coordinate, divided by one overall s.d. "
            "(ours; the paper gives no sizes)", "wine z-scored (not stated)",
            "USPS: digits 1-5 at 8 x 8 as the text says (the caption: D = 256), 100 images a digit per split",
            "70/30 splits (the paper's Fig. 1 protocol); 40 / 40 / 10 splits",
            "NCA: best of 5 starts (PCA start and random ones; the paper's starts are not stated)"]),
    }


#: check -> (what it is compared with, [every difference from the paper's protocol])
PROTOCOL_DIFFERENCES = _protocol_differences()


def _nips2005_protocol_differences():
    """The NIPS 2005 protocol check's differences (``test_paper_nips2005.py``; sizes from Table 1, Sec. 3's split)."""
    size = {w: int(P.value("nips2005", "Table 1", "Bal", w)) for w in ("examples (train)", "examples (test)")}
    split = "/".join(f"{P.value('nips2005', 'Sec. 3', 'random splits of each run', c):.0f}" for c in ("training %", "test %"))
    return ("NIPS 2005 Sec. 3 and Table 1 (iris, wine, bal, faces: no error rates printed; Sec. 3's direction only)", [
        "model selection: one stratified 70/30 inner training/validation split of each training part; grids k in "
        "{1, 3, 5} x mu in {0.25, 0.5, 0.75}, ties to k = 3, mu = 0.5 (the paper gives neither the fraction nor the "
        "grids)", "the metric refitted on the whole training part at the selected k and mu, kNN at the selected k "
        "(not stated); the Euclidean k validated on the same k grid (not stated)",
        f"bal: a random stratified {size['examples (train)'] + size['examples (test)']}-point subsample of UCI's 625 "
        f"per split, split {size['examples (train)']}/{size['examples (test)']} as Table 1 (the text: {split})",
        "LMNN solved to a certified optimum (Clarabel, gap 1e-6, on iris and bal; wine unscaled, the "
        "JAX backend to a certified 1e-4) where the paper used its own sub-gradient solver",
        "kNN votes: tie-inclusive (whole groups of equal distance dropped on a tied vote; the paper drops one "
        "neighbour at a time, Sec. 3; the index rule is reported beside)",
        "the AT&T faces: the Olivetti file's 64x64 images area-averaged to 38x31 (the paper's down-sampling of the "
        "original images is not stated); k grid {1, 3} (the inner training part holds 4-5 images a person); the JAX "
        "backend to a certified 1e-3",
        "the multiclass SVM bars of Fig. 2 not run"])


PROTOCOL_DIFFERENCES["nips2005"] = _nips2005_protocol_differences()


# ----------------------------------------------------------------------------- results by paper table

#: JMLR 2009 Table 1's error rows and the columns of the data sets here (20news and isolet are not in the data)
T1_ROWS = ("kNN Euclidean", "kNN PCA", "kNN LDA", "kNN RCA", "kNN MCC", "kNN NCA", "LMNN PCA", "LMNN LDA",
           "LMNN (energy)", "LMNN (multiple passes)", "LMNN (multiple metrics)", "multiclass SVM")
T1_COLUMNS = ("mnist", "letters", "yFaces", "bal", "oFaces", "wine", "iris")
_LMNN_CHECKS = {"iris": "iris", "wine": "wine", "balance-scale": "bal", "faces": "oFaces",
                "letter-recognition": "letters", "yale-b": "yFaces", "yale-b-sec42": "yFaces", "mnist-5k": "mnist"}


def _ms(mean, se, n):
    return f"{mean:.2f} +- {se:.2f} ({n})"


def _table1_measurements(results):
    """``{(Table 1 row, column): [cell]}`` from the stored results; a cell is a dict with the measured ``mean``,
    ``se`` and ``n`` (splits), ``where`` (check and variant), and, to find the check's own assertion on it,
    ``check``, ``variant`` and ``hint`` (words the assertion's text holds)."""
    out = {}

    def add(row, col, stats, where, check=None, variant="", hint=None):
        mean, se, n = stats
        out.setdefault((row, col), []).append({"mean": mean, "se": se, "n": n, "where": where, "check": check,
                                               "variant": variant, "hint": hint})

    for check, col in _LMNN_CHECKS.items():
        data = results.get(check)
        for r in (data or {}).get("rows", []):
            if "standardized" in r["variant"]:
                continue
            s, where = r["summary"], f"{check}: {r['variant']}"
            key = check if check in EUCLIDEAN_ROW else _ROW_KEY[r["dataset"]]  # a second check of a set: its rows'
            rows = {"euclidean": EUCLIDEAN_ROW[key], "lmnn": "LMNN PCA", "energy": "LMNN (energy)"}
            for m, row in rows.items():
                if m != "euclidean" or "stopped early" not in r["variant"]:
                    add(row, col, (s[m]["mean"], s[m]["se"], r["n_splits"]), where, check, r["variant"],
                        LABEL[m] + " ")
            if "euclidean_raw" in s and r is data["rows"][0]:
                add("kNN Euclidean", col, (s["euclidean_raw"]["mean"], s["euclidean_raw"]["se"], r["n_splits"]),
                    f"{check}: raw pixels", check, r["variant"], "pixels")
    for t in (results.get("table1-baselines") or {}).get("tables", []):
        for m, row in TABLE1_ROW.items():
            s = t["summary"].get(m)
            if s is not None:
                add(row, t["dataset"], (s["test"]["mean"], s["test"]["se"], s["n_splits"]), "table1-baselines")
    ext = {"LMNN (2 passes)": "LMNN (multiple passes)", "multi-metric LMNN (one metric per class)":
           "LMNN (multiple metrics)", "LMNN (1 pass), same splits": "LMNN PCA"}
    for r in (results.get("extensions") or {}).get("rows", []):
        row = ext.get(r["variant"])
        if row is not None:
            s = r["summary"]["lmnn"]
            add(row, _LMNN_CHECKS[r["dataset"]], (s["mean"], s["se"], r["n_splits"]),
                "extensions: full set" + (", z-scored" if r["dataset"] == "wine" else ""))
    for r in (results.get("letter-extensions") or {}).get("rows", []):  # letters, the letter check's splits
        row = ext.get(r["variant"])
        if row is not None and row != "LMNN PCA":
            s = r["summary"]["lmnn"]
            add(row, "letters", (s["mean"], s["se"], r["n_splits"]), f"letter-extensions: {r['variant']}")
    for r in (results.get("extensions-faces") or {}).get("rows", []):  # the faces check's protocol
        row = ext.get(r["variant"])
        if row is not None:
            s = r["summary"]["lmnn"]
            add(row, "oFaces", (s["mean"], s["se"], r["n_splits"]), f"extensions-faces: {r['variant']}",
                "extensions-faces", "", "2-pass" if row == "LMNN (multiple passes)" else "1-pass")
    # the multi-pass checks on the Yale B and MNIST-5k checks' protocols (more splits): their single-pass rows' kNN PCA
    for check, column in (("yale-extensions", "yFaces"), ("mnist-extensions", "mnist")):
        for r in (results.get(check) or {}).get("rows", []):
            row = ext.get(r["variant"])
            if row is not None:
                s = r["summary"]["lmnn"]
                add(row, column, (s["mean"], s["se"], r["n_splits"]), f"{check}: {r['variant']}")
                if row == "LMNN PCA":  # its Euclidean error after PCA, on the same splits
                    s = r["summary"]["euclidean"]
                    add("kNN PCA", column, (s["mean"], s["se"], r["n_splits"]), f"{check}: same splits")
    return out


def _cell_assertion(results, cell, paper):
    """The stored assertion of ``cell``'s check on that cell's agreement with the paper's number ``paper``: the one
    assertion whose text names the paper's number and the cell's hint, of the cell's variant (early-stopped and
    certified variants are told apart by their names); ``None`` when there is none or no single one."""
    if cell["check"] is None or cell["hint"] is None:
        return None
    variant = cell["variant"].lower()
    found = []
    for a in (results.get(cell["check"]) or {}).get("assertions", []):
        head = a["what"].split(":", 1)[0].lower()
        if (f"the paper's {paper:.2f} %" in a["what"] and cell["hint"] in a["what"]
                and ("pixels" in a["what"]) == (cell["hint"] == "pixels")
                and ("stopped early" in head) == ("stopped early" in variant)
                and ("certified" in head) == ("certified" in variant)):
            found.append(a)
    return found[0] if len(found) == 1 else None


def _verdict(results, cell, paper_text, n_paper):
    """The verdict of a cell against the paper's printed number: agreement within 2 s.e. of the difference of the
    two means (the rule of ``_common.assert_paper_band``: the paper's s.e. is taken from our split-to-split s.d.
    and its ``n_paper`` splits), and the outcome of the check's own assertion on it where it made one."""
    try:
        paper = float(paper_text)
    except ValueError:
        return "-"
    mean, se, n = cell["mean"], cell["se"], cell["n"]
    diff = mean - paper
    if n < 2:
        text = f"{diff:+.2f} pp (one split: no s.e.)"
    else:
        band = 2.0 * (se ** 2 + se ** 2 * n / n_paper) ** 0.5
        text = (f"agrees within 2 s.e. ({diff:+.2f} pp, band {band:.2f})" if abs(diff) <= band else
                f"differs: {diff:+.2f} pp (band {band:.2f})")
    a = _cell_assertion(results, cell, paper)
    if a is not None:
        o = a.get("outcome") or (KNOWN if a.get("known_mismatch") else PASS if a["passed"] else "FAIL")
        text += f"; asserted by {cell['check']}: {o}" + (" (cause in its section)" if o == KNOWN else "")
    return text


def _local_mean(results, check, how, cell):
    for t in (results.get(check) or {}).get("tables", []):
        acc = t.get("summary", {}).get(how, {}).get(cell, {}) if isinstance(t.get("summary"), dict) else {}
        if isinstance(acc, dict) and acc.get("accuracy"):  # several batches: mean +- s.e. (batches)
            a, n = acc["accuracy"], len(acc["accuracy"])
            m = sum(a) / n
            return f"{m:.2f}" if n == 1 else _ms(m, (sum((v - m) ** 2 for v in a) / (n - 1) / n) ** 0.5, n)
    return None


def _gerry_stats(results, check, dataset, k, method):
    """``(mean, se, n)`` of a method's test error in a gerrymandering check's table, or ``None``."""
    for t in (results.get(check) or {}).get("tables", []):
        if t["title"] == f"{dataset}, k = {k}":
            s = t["summary"][method]["test"]
            return s["mean"], s["se"], t["summary"][method]["n_splits"]
    return None


def _gerry_cell(results, check, dataset, k, method):
    stats = _gerry_stats(results, check, dataset, k, method)
    return "-" if stats is None else _ms(*stats)


def _gerry_verdict(results, check, k, method, paper_text):
    """The verdict of a letters cell of a gerrymandering check against Trivedi et al.'s number (``_verdict``'s
    rule, with the paper's 5 folds, Sec. 6); ``-`` where no check runs the method."""
    stats = None if method is None else _gerry_stats(results, check, "letter-recognition", k, method)
    if stats is None:
        return "-"
    folds = P.value("trivedi2014", "Sec. 6", "five of the seven sets", "cross-validation folds")
    cell = {"mean": stats[0], "se": stats[1], "n": stats[2], "check": None, "hint": None}
    return _verdict(results, cell, paper_text, folds)


def _dimred_mnist(results, title, method):
    for t in (results.get("dimred-mnist") or {}).get("tables", []):
        if t["title"] == title and method in t["summary"]:
            s = t["summary"][method]
            return _ms(s["test"]["mean"], s["test"]["se"], s["n_splits"])
    return "not run"


def paper_table_sections(results):
    """Markdown lines: the stored results laid out as the papers' tables (``results``: check -> stored data)."""
    lines = ["## Results by paper table", "",
             "Paper numbers from `paper_checks/paper_numbers.csv`; ours as mean +- s.e. (splits), with the check "
             "(and variant) that measured them; the protocols differ as listed under \"Protocol differences\". "
             "\"not run\": no check measures the cell yet (the missing rows of issue 33).", ""]
    # JMLR 2009 Table 1
    lines += ["### JMLR 2009, Table 1 (test error %; 20news and isolet are not in the data folder)", "",
              "Verdict: whether ours agrees with the paper's number within 2 standard errors of the difference of the "
              "two means (the paper gives no s.e.: its s.e. is taken from our split-to-split s.d. and its number of "
              "splits, as the checks' band assertions do), and, where the check asserts that agreement itself, the "
              "outcome it recorded (a known mismatch with its measured cause in the check's section). A cell that "
              "differs without an assertion is one whose protocol differs from the paper's (see \"Protocol "
              "differences\"): it is shown, not compared.", "",
              "| Table 1 row | column | paper | ours | measured by | verdict |", "|---|---|---|---|---|---|"]
    meas = _table1_measurements(results)
    for row in T1_ROWS:
        for col in T1_COLUMNS:
            paper = P.printed("jmlr2009", "Table 1", row, col)
            n_paper = T1("# of train/test splits", col)
            for cell in meas.get((row, col)) or [None]:
                if cell is None:
                    lines.append(f"| {row} | {col} | {paper} | not run | - | - |")
                else:
                    lines.append(f"| {row} | {col} | {paper} | {_ms(cell['mean'], cell['se'], cell['n'])} | "
                                 f"{cell['where']} | {_verdict(results, cell, paper, n_paper)} |")
    lines.append("")
    # Trivedi et al. Table 1 (and Table 3 for USPS)
    lines += ["### Trivedi et al. 2014, Table 1 (kNN test error %, features z-scored) and Table 3 (no scaling)", "",
              "Ours on letters: z-scored (Table 1) and raw (Table 3, check gerrymander-table3), the paper's protocol "
              "otherwise as listed; on USPS: z-scored as Table 1, on random splits of the standard partition's sizes "
              "drawn from the 11,000-image file (not the standard partition), so USPS numbers are not compared. "
              "Table 3's NCA row stands in the 1-NCA line. Verdicts on letters as in JMLR 2009 Table 1 above, "
              "against the paper's 5 folds (Sec. 6); the checks assert directions and the gerrymandering cells "
              "(their sections).", "",
              "| k | method | letters paper (Table 1) | letters ours (z-scored) | verdict (Table 1) | "
              "letters paper (Table 3) | letters ours (unscaled) | verdict (Table 3) | USPS paper (Table 1) | "
              "USPS paper (Table 3) | USPS ours (z-scored) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    ours_name = {"Euclidean": "euclidean", "LMNN": "lmnn", "1-NCA": "nca", "ours": "gerrymander"}
    for k in (3, 7, 11):
        for m in ("Euclidean", "LMNN", "GB-LMNN", "MLR", "ITML", "1-NCA", "k-NCA", "ours"):
            t3 = "NCA" if m == "1-NCA" else m
            t3_usps = P.printed("trivedi2014", "Table 3", t3, f"USPS, k = {k}") if m != "k-NCA" else "-"
            t3_letters = P.printed("trivedi2014", "Table 3", t3, f"letters, k = {k}") if m != "k-NCA" else "-"
            own = ours_name.get(m)
            t1_letters = P.printed('trivedi2014', 'Table 1', f'{k} / {m}', 'letters')
            lines.append(
                f"| {k} | {m} | {t1_letters} | "
                f"{_gerry_cell(results, 'gerrymander', 'letter-recognition', k, own) if own else 'not run'} | "
                f"{_gerry_verdict(results, 'gerrymander', k, own, t1_letters)} | {t3_letters} | "
                f"{_gerry_cell(results, 'gerrymander-table3', 'letter-recognition', k, own) if own else 'not run'} | "
                f"{_gerry_verdict(results, 'gerrymander-table3', k, own, t3_letters)} | "
                f"{P.printed('trivedi2014', 'Table 1', f'{k} / {m}', 'USPS')} | {t3_usps} | "
                f"{_gerry_cell(results, 'gerrymander-usps', 'usps', k, own) if own else 'not run'} |")
    lines.append("")
    # Ramanan & Baker Tables II-IV
    lines += ["### Ramanan & Baker, Tables II-IV (recognition rate %)", "",
              "MNIST-5k is a resampled subset of MNIST; Yale B and USPS stand for MultiPIE and Caltech 101 (not "
              "available): their columns are compared only in direction.", "",
              "| table | cell | Sampled MNIST paper | MNIST-5k ours | MultiPIE paper | Yale B ours | Caltech paper | "
              "USPS ours |", "|---|---|---|---|---|---|---|---|"]
    for how, table in P.RB_TABLES.items():
        for cell in P.RB_CELLS:
            cells = []
            for data, check in (("Sampled MNIST", "local-mnist"), ("MultiPIE", "local-yale-b"), ("Caltech", "local-usps")):
                ours = _local_mean(results, check, how, cell)
                cells += [f"{P.ramanan_baker(how, data, cell)}", "-" if ours is None else ours]
            lines.append(f"| {table} ({how}) | {cell} | " + " | ".join(cells) + " |")
    lines.append("")
    # the rest
    fig13 = {w: P.jmlr_text("Sec. 6.3", "MNIST (Fig. 13)", w) for w in (
        "LMNN-R test error % at 15 dimensions", "LMNN-R test error % at 25 dimensions",
        "baseline kNN test error % (original space)")}
    lines += ["### Other paper numbers", "",
              f"- JMLR 2009 Sec. 6.3 (Fig. 13, MNIST): LMNN-R {fig13['LMNN-R test error % at 15 dimensions']:.2f} % at "
              f"15 dimensions, {fig13['LMNN-R test error % at 25 dimensions']:.2f} % at 25, baseline "
              f"{fig13['baseline kNN test error % (original space)']:.2f} % in the original space. Ours (dimred) are "
              "on ORL faces at ranks 5, 10, 20: directions only. Ours on MNIST-5k at PCA 50 (dimred-mnist; reduced, shown "
              f"beside, not compared; test error %, mean +- s.e. (splits)): LMNN-R "
              f"{_dimred_mnist(results, 'MNIST-5k, rank 15', 'lmnn_r')} at 15, "
              f"{_dimred_mnist(results, 'MNIST-5k, rank 25', 'lmnn_r')} at 25, Euclidean 3-NN on the raw pixels "
              f"{_dimred_mnist(results, 'MNIST-5k, baselines and the full-rank solve LMNN-S truncates', 'euclidean_raw')}.",
              f"- JMLR 2009 Sec. 4.6: energy-based LMNN on MNIST {P.jmlr_text('Sec. 4.6', 'MNIST', 'energy-based LMNN test error %'):.1f} %; "
              f"NIPS 2005 abstract: {P.value('nips2005', 'Abstract', 'MNIST', 'test error %'):.1f} %. Not run on the full "
              "set (only the 5,000-image subset is in the data folder).",
              "- NIPS 2005: Table 1 gives data sizes (other than JMLR 2009's) and Fig. 2 bars that the text copy does "
              "not assign to data sets: no number compared. Its protocol (Table 1's sizes, k and mu chosen on a "
              "validation part, 100 runs) is run on iris, wine and balance, asserting Sec. 3's directions: see the "
              "NIPS 2005 protocol section.",
              "- Goldberger et al. 2004, Fig. 1: bars only (no numbers in the text): see the NCA section for ours.", ""]
    return lines
