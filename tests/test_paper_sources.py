"""Every number the paper checks attribute to a paper against the paper itself (issue 33).

``paper_checks/paper_numbers.csv`` is the one source table of the paper checks' paper numbers. Each entry
from a table must equal that table's transcription in ``tables.md`` and occur in the paper's plain text;
each entry from running text must stand in the paper's text inside its stated phrase (whose ``{}`` marks the
number's place). The papers are looked up in ``$METRICOPT_PAPERS``, else in ``../shared/papers`` beside the repository; the tests are skipped,
with the reason, where neither exists.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAPER_CHECKS = ROOT / "paper_checks"
ENV = "METRICOPT_PAPERS"

def papers_folder():
    raw = os.environ.get(ENV, "").strip()
    return pathlib.Path(raw).expanduser() if raw else ROOT.parent / "shared" / "papers"


@pytest.fixture(scope="module")
def sources():
    sys.path.insert(0, str(PAPER_CHECKS))
    try:
        import paper_numbers

        yield paper_numbers
    finally:
        sys.path.remove(str(PAPER_CHECKS))


@pytest.fixture(scope="module")
def papers():
    folder = papers_folder()
    if not (folder / "tables.md").is_file():
        pytest.skip(f"the papers folder {str(folder)!r} (with tables.md) was not found: set {ENV} to the folder "
                    "holding the five papers' plain text and tables.md")
    return folder


# ----------------------------------------------------------------------------- reading tables.md

#: header cells of tables.md that name a row (the row key joins them with " / ")
KEY_HEADERS = {"statistic / method", "k", "method", "data", "when"}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?|N/A")


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def md_tables(text):
    """``{heading: (header, {row key: cells})}`` for the first markdown table under every heading."""
    out, heading, lines = {}, None, text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.strip()
        elif line.startswith("|") and heading is not None and heading not in out:
            header = _cells(line)
            n_key = 0
            while n_key < len(header) and header[n_key] in KEY_HEADERS:
                n_key += 1
            rows = {}
            i += 2  # the |---| line
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                rows[" / ".join(cells[:n_key])] = dict(zip(header[n_key:], cells[n_key:]))
                i += 1
            out[heading] = (header, rows)
            continue
        i += 1
    return out


def md_value(cell, part=None):
    """The number a transcribed cell prints (``"**65.3 +- 1.4**"`` -> ``"65.3"``); ``part``: the index into a
    cell holding several values separated by ``/`` (Trivedi's Table 3: k = 3 / 7 / 11)."""
    if part is not None:
        cell = cell.split(" / ")[part]
    m = NUMBER.match(cell.replace("**", "").strip())
    return m.group(0) if m else None


def transcribed(tables, sources, e):
    """The value ``tables.md`` gives for a table entry ``e`` (``None``: no such cell)."""
    prefix = sources.MD_TABLES[(e.paper, e.where)]
    matches = [h for h in tables if h.startswith(prefix)]
    assert len(matches) == 1, f"tables.md: {len(matches)} headings start with {prefix!r}"
    heading = matches[0]
    _, rows = tables[heading]
    row = rows.get(e.row)
    if row is None:
        return None
    column, part = e.column, None
    if column not in row and ", k = " in column:  # "USPS, k = 7": one of a cell's k = 3 / 7 / 11 values
        column, k = column.split(", k = ")
        ks = [int(v) for v in re.search(r"k = ([\d /]+)", heading).group(1).split("/")]
        part = ks.index(int(k))
    cell = row.get(column)
    return None if cell is None else md_value(cell, part)


# ----------------------------------------------------------------------------- reading the papers' text


def normalise(text):
    """Whitespace runs as one space, the text's ``±`` and LaTeX ``\\pm`` as ``+-``."""
    return re.sub(r"\s+", " ", text.replace("±", "+-").replace("\\pm", "+-"))


def occurrences(text, number):
    """Start offsets of ``number`` standing alone in ``text`` (not part of a longer number)."""
    return [m.start() for m in re.finditer(r"(?<![\d.])" + re.escape(number) + r"(?![\d]|\.\d)", text)]


def in_phrase(text, phrase, number):
    """Whether the paper's text holds ``phrase`` with ``number`` in the place of its ``{}`` (case-insensitive,
    whitespace normalised; the number may not continue into more digits)."""
    before, after = normalise(phrase).lower().split("{}")
    pattern = re.escape(before) + r"(?<![\d.])" + re.escape(number) + r"(?![\d]|\.\d)" + re.escape(after)
    return re.search(pattern, text.lower()) is not None


@pytest.fixture(scope="module")
def texts(papers, sources):
    return {p: normalise((papers / f).read_text(encoding="utf-8")) for p, f in sources.PAPER_FILES.items()}


@pytest.fixture(scope="module")
def tables(papers):
    return md_tables((papers / "tables.md").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- the tests


def test_the_source_table_loads_and_names_every_source(sources):
    entries = sources.entries()
    assert len(entries) > 300
    for e in entries:
        assert e.paper in sources.PAPERS and e.where and e.row and e.column and e.value, e
        if not e.from_table:
            assert e.phrase.count("{}") == 1, f"{e}: a number from running text needs a phrase with one {{}}"
    with pytest.raises(KeyError, match="no paper number"):
        sources.value("jmlr2009", "Table 1", "kNN Euclidean", "not a data set")


def test_every_table_entry_equals_the_transcription_in_tables_md(sources, tables):
    wrong = []
    for e in sources.entries():
        if e.from_table:
            got = transcribed(tables, sources, e)
            if got != e.value:
                wrong.append(f"{e.cite()}: paper_numbers.csv has {e.value!r}, tables.md {got!r}")
    assert not wrong, "\n".join(wrong)


def test_every_table_entry_occurs_in_the_papers_text(sources, texts):
    """tables.md is a reading aid: the number must also stand in the paper (the text wins where they differ)."""
    missing = [e.cite() for e in sources.entries()
               if e.from_table and e.value != "N/A" and not occurrences(texts[e.paper], e.value)]
    assert not missing, "\n".join(missing)


def test_every_text_entry_stands_in_its_phrase_in_the_paper(sources, texts):
    wrong = [f"{e.cite()}: {e.phrase.replace('{}', e.value)!r} is not in {sources.PAPER_FILES[e.paper]}"
             for e in sources.entries() if not e.from_table and not in_phrase(texts[e.paper], e.phrase, e.value)]
    assert not wrong, "\n".join(wrong)


def test_an_edited_number_fails(sources, tables, texts):
    """The test catches an edit: every entry with its last digit changed disagrees with the papers."""
    import dataclasses

    for e in sources.entries():
        if e.value == "N/A":
            continue
        edited = dataclasses.replace(e, value=e.value[:-1] + str((int(e.value[-1]) + 1) % 10))
        if e.from_table:
            assert transcribed(tables, sources, edited) != edited.value, e
        else:
            assert not in_phrase(texts[e.paper], e.phrase, edited.value), e


def test_the_checks_quote_no_paper_number_of_their_own():
    """No number in a paper check's code is introduced as the paper's: every "paper" number is formatted from
    the source table. A safety net, not a proof: flags a string literal where a number in percent or pp
    follows "paper" directly ("the paper's 4.87 %", "paper: -0.50 pp", "(paper 6.03 %)")."""
    pattern = re.compile(r"\bpaper(?:'s)?:?\s+[-+]?\d+(?:\.\d+)?\s*(?:%|pp\b)", re.IGNORECASE)
    found = []
    for path in sorted(PAPER_CHECKS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.search(node.value):
                found.append(f"{path.name}:{node.lineno}: {pattern.search(node.value).group(0)!r}")
    assert not found, "paper numbers typed into the checks (use paper_numbers):\n" + "\n".join(found)


def test_revised_claims_agree_with_the_known_mismatches(sources):
    """Every claim revised against the papers (paper_checks/paper_review.py) whose stored measurement fails it has
    its written reason in _common.KNOWN_MISMATCHES, and one it passes has none."""
    sys.path.insert(0, str(PAPER_CHECKS))
    try:
        import paper_review

        paper_review._consistent()
        assert set(paper_review.PROTOCOL_DIFFERENCES) >= {"iris", "wine", "balance-scale", "faces", "table1-baselines",
                                                          "gerrymander-usps"}
    finally:
        sys.path.remove(str(PAPER_CHECKS))
