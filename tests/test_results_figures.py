"""paper_checks/figures.py: one paired dot plot per paper table of RESULTS.md, drawn from the table's own cells."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "paper_checks"))

import figures  # noqa: E402

LINES = [
    "# RESULTS", "", "## Results by paper table", "", "### Table 1 (test error %)", "", "a note", "",
    "| row | column | paper | ours | measured by |", "|---|---|---|---|---|",
    "| kNN | wine | 25.00 | 28.10 +- 1.20 (10) | wine |",
    "| LMNN | wine | 8.72 | not run | - |",
    "| LMNN | iris | 4.30 | 4.00 +- 0.50 (30) | iris |", "",
    "### Table 3", "", "| k | method | letters paper | letters ours | USPS paper | USPS ours |", "|---|---|---|---|---|---|",
    "| 3 | LMNN | 3.22 | 3.50 +- 0.10 (3) | 4.1 | - |", "",
    "## iris", "", "| paper | ours |", "|---|---|", "| 1.0 | 2.0 +- 0.1 (3) |",
]


def test_points_pair_each_paper_column_with_the_next_ours_column():
    header = ["k", "method", "letters paper", "letters ours", "USPS paper", "USPS ours"]
    pts = figures.table_points(header, [["3", "LMNN", "3.22", "3.50 +- 0.10 (3)", "4.1", "-"]])
    assert pts == [("3 / LMNN", "letters paper vs letters ours", 3.22, 3.5, 0.1)]  # USPS: no number of ours


def test_one_figure_per_paper_table_linked_under_it(tmp_path):
    out = figures.add_figures(LINES, tmp_path)
    links = [ln for ln in out if ln.startswith("![")]
    assert len(links) == 2  # the two paper tables; the per-check section below gets none
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["table-1-test-error.png", "table-3.png"]
    i = out.index("| LMNN | iris | 4.30 | 4.00 +- 0.50 (30) | iris |")
    assert out[i + 1: i + 3] == ["", "![Table 1 (test error %): paper against ours](results/figures/table-1-test-error.png)"]
    assert (tmp_path / "figures" / "table-1-test-error.png").stat().st_size > 1000
