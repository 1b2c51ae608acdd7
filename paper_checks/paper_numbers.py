"""The one place where the paper checks take the papers' numbers from.

Every number a paper check, ``_common.py`` or ``make_results.py`` attributes to a paper is an entry of
``paper_numbers.csv`` beside this file: the paper, where in it (a table, a section or a figure caption),
the row and the column (for a number in running text: what it is), the value *as printed* and, for a
number in running text, a short phrase of the paper with ``{}`` in the number's place. Code reads them with :func:`value` (or
:func:`printed`, :func:`cite`); a number that is not in the file raises :class:`KeyError`, so no check
can quote a paper number that has no source.

``tests/test_paper_sources.py`` checks every entry against the papers in ``../shared/papers`` (or
``$METRICOPT_PAPERS``): an entry from a table must equal that table's transcription in ``tables.md``
and occur in the paper's text; an entry from running text must stand in the paper's text inside its
phrase. Editing a number here without the paper saying so fails that test.

The papers (``paper`` column):

* ``jmlr2009``: K. Q. Weinberger and L. K. Saul, *Distance Metric Learning for Large Margin Nearest
  Neighbor Classification*, JMLR 10:207-244, 2009 (``lmnn-jmlr2009.txt``). Its error rates are in
  Table 1 (Section 4); Section 6 is about ball trees (metric trees).
* ``nips2005``: K. Q. Weinberger, J. Blitzer and L. K. Saul, the NIPS 18 (2005) paper of the same title
  (``lmnn-nips2005.txt``). Its Table 1 gives data sizes and solver figures, no error rates; its error
  rates are the bars of Fig. 2, whose values the text extraction does not assign to data sets.
* ``nca2004``: J. Goldberger, S. Roweis, G. Hinton and R. Salakhutdinov, *Neighbourhood Components
  Analysis*, NIPS 17, 2004 (``nca-nips2004.txt``); Fig. 1 is a bar chart without numbers.
* ``ramanan-baker``: D. Ramanan and S. Baker, *Local Distance Functions: A Taxonomy, New Algorithms, and
  an Evaluation*, IEEE TPAMI, 2011 (``local-distance-functions-ramanan-baker.txt``), Tables II-IV.
* ``trivedi2014``: S. Trivedi, D. McAllester and G. Shakhnarovich, *Discriminative Metric Learning by
  Neighborhood Gerrymandering*, NIPS 27, 2014 (``neighbourhood-gerrymandering-nips2014.txt``).
"""

from __future__ import annotations

import csv
import functools
import pathlib
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent
CSV = HERE / "paper_numbers.csv"

#: short citation of each paper (the ``paper`` column)
PAPERS = {
    "jmlr2009": "Weinberger & Saul, JMLR 2009",
    "nips2005": "Weinberger, Blitzer & Saul, NIPS 2005",
    "nca2004": "Goldberger et al., NIPS 2004",
    "ramanan-baker": "Ramanan & Baker, TPAMI 2011",
    "trivedi2014": "Trivedi et al., NIPS 2014",
}

#: the plain-text copy of each paper in the papers folder
PAPER_FILES = {
    "jmlr2009": "lmnn-jmlr2009.txt",
    "nips2005": "lmnn-nips2005.txt",
    "nca2004": "nca-nips2004.txt",
    "ramanan-baker": "local-distance-functions-ramanan-baker.txt",
    "trivedi2014": "neighbourhood-gerrymandering-nips2014.txt",
}

#: the heading of ``tables.md`` under which each transcribed table is the first markdown table
MD_TABLES = {
    ("jmlr2009", "Table 1"): "## 1. Weinberger & Saul, JMLR 10, 2009 -- Table 1",
    ("nips2005", "Table 1"): "## 3. Weinberger, Blitzer & Saul, NIPS 2005",
    ("ramanan-baker", "Table II"): "### Table II --",
    ("ramanan-baker", "Table III"): "### Table III --",
    ("ramanan-baker", "Table IV"): "### Table IV --",
    ("trivedi2014", "Table 1"): "### Table 1 --",
    ("trivedi2014", "Table 3"): "### Table 3 (appendix)",
}

#: JMLR 2009 Table 1's column of each data set a check runs (the check's data-set name -> the column)
JMLR_COLUMN = {"iris": "iris", "wine": "wine", "balance-scale": "bal", "faces": "oFaces",
               "letter-recognition": "letters", "yale-b": "yFaces", "mnist-5k": "mnist"}


@dataclass(frozen=True)
class Entry:
    """One number of one paper: ``value`` as printed (``"N/A"`` where the paper prints that)."""

    paper: str
    where: str
    row: str
    column: str
    value: str
    phrase: str = ""

    @property
    def key(self):
        return (self.paper, self.where, self.row, self.column)

    @property
    def number(self):
        """The value as a float (``None`` for ``N/A``)."""
        return None if self.value == "N/A" else float(self.value)

    @property
    def from_table(self):
        """Whether the entry comes from a table that ``tables.md`` transcribes (else from running text)."""
        return (self.paper, self.where) in MD_TABLES

    def cite(self):
        """``"Weinberger & Saul, JMLR 2009, Table 1, row 'kNN PCA', column 'oFaces'"``-style source."""
        if self.from_table:
            return f"{PAPERS[self.paper]}, {self.where}, row '{self.row}', column '{self.column}'"
        return f"{PAPERS[self.paper]}, {self.where} ({self.row}: {self.column})"


@functools.lru_cache(maxsize=None)
def entries(path=CSV):
    """Every entry of the source table, in file order (``#`` lines are comments)."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = [r for r in csv.reader(line for line in f if line.strip() and not line.startswith("#"))]
    head, body = rows[0], rows[1:]
    if head != ["paper", "where", "row", "column", "value", "phrase"]:
        raise ValueError(f"{path}: unexpected header {head}")
    out = [Entry(*r) for r in body]
    seen = set()
    for e in out:
        if e.paper not in PAPERS:
            raise ValueError(f"{path}: unknown paper {e.paper!r} in {e}")
        if e.key in seen:
            raise ValueError(f"{path}: duplicate entry {e.key}")
        if not e.from_table and e.phrase.count("{}") != 1:
            raise ValueError(f"{path}: an entry from running text needs a phrase with one {{}} (the number's "
                             f"place): {e}")
        seen.add(e.key)
        e.number  # noqa: B018 -- a value that is not a number (or N/A) fails here
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _index():
    return {e.key: e for e in entries()}


def entry(paper, where, row, column):
    """The :class:`Entry` at ``(paper, where, row, column)``; :class:`KeyError` if the table has none."""
    try:
        return _index()[(paper, where, row, column)]
    except KeyError:
        raise KeyError(f"no paper number {(paper, where, row, column)} in {CSV.name}: add it with its source "
                       "(tests/test_paper_sources.py checks it against the paper)") from None


def value(paper, where, row, column):
    """The number at ``(paper, where, row, column)`` as a float (``None`` where the paper prints N/A)."""
    return entry(paper, where, row, column).number


def printed(paper, where, row, column):
    """The number as the paper prints it (``"4.9"``, ``"25.00"``, ``"N/A"``)."""
    return entry(paper, where, row, column).value


def cite(paper, where, row, column):
    """Where the number stands in the paper (see :meth:`Entry.cite`)."""
    return entry(paper, where, row, column).cite()


# ----------------------------------------------------------------------------- short forms used by the checks


def jmlr(row, column):
    """JMLR 2009 Table 1: ``jmlr("kNN PCA", "oFaces")`` (``column``: a Table 1 column or a check's data set)."""
    return value("jmlr2009", "Table 1", row, JMLR_COLUMN.get(column, column))


def jmlr_cite(row, column):
    return cite("jmlr2009", "Table 1", row, JMLR_COLUMN.get(column, column))


def jmlr_text(where, row, column):
    """A number of JMLR 2009's running text, e.g. ``jmlr_text("Sec. 4.2", "Yale B", "training images per subject")``."""
    return value("jmlr2009", where, row, column)


def trivedi(k, method, column, table="Table 1"):
    """Trivedi et al. 2014, Table 1 (z-scored features) or Table 3 (no feature scaling): kNN error % of ``method``
    ("Euclidean", "LMNN", "1-NCA", "ours", ...) at ``k`` on ``column`` ("letters", "USPS")."""
    if table == "Table 1":
        return value("trivedi2014", table, f"{k} / {method}", column)
    return value("trivedi2014", table, method, f"{column}, k = {k}")


#: Ramanan & Baker: the tables of each "how", and the seven cells of a row as the local check names them
#: (cell -> the table row's "when" and the table column)
RB_TABLES = {"lda": "Table II", "lmnn": "Table III", "hybrid": "Table IV"}
RB_CELLS = {"Global": ("Offline", "Global"), "Class": ("Offline", "Class"), "Train": ("Online", "Train"),
            "Test": ("Online", "Test"), "Interp Train": ("Interp", "Train"), "Interp Test": ("Interp", "Test"),
            "Line": ("Interp", "Line")}


def ramanan_baker(how, data, cell):
    """Recognition rate % of Ramanan & Baker's Tables II-IV: ``how`` in lda/lmnn/hybrid, ``data`` in
    "MultiPIE", "Caltech", "Sampled MNIST", ``cell`` one of :data:`RB_CELLS`."""
    when, column = RB_CELLS[cell]
    return value("ramanan-baker", RB_TABLES[how], f"{data} / {when}", column)


def direction(a, b):
    """The paper's direction of ``a`` against ``b`` (two numbers of a table): ``"below"``, ``"tie"`` (equal as
    printed) or ``"above"``. A check asserts a gain only where this is ``"below"``; where it is ``"above"`` it
    asserts at most that ``a`` is not significantly below ``b``; a tie it does not assert."""
    if a is None or b is None:
        return None
    return "below" if a < b else "above" if a > b else "tie"
