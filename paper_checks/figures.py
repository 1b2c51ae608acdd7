"""One figure per paper table of RESULTS.md: the paper's number against ours (mean and standard error over the
splits), cell by cell, as a paired dot plot, saved beside the results (``results/figures/``).

The figures are drawn from the tables ``make_results.py`` has just written (the section "Results by paper table"),
so they show exactly the numbers the text shows: in every table, each column whose header names the paper is
paired with the next column whose header says "ours"; a cell pair is plotted when both hold a number (ours as
``mean +- se (splits)``). Nothing is drawn for cells no check runs.
"""

from __future__ import annotations

import pathlib
import re

NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:\+-\s*(\d+(?:\.\d+)?))?")


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(text):
    """``(value, se)`` from ``"12.3"`` or ``"12.3 +- 0.4 (10)"``; ``None`` when the cell holds no number."""
    m = NUMBER.match(text.replace("**", ""))
    if not m:
        return None
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


def table_points(header, rows):
    """The plotted pairs of one markdown table: ``[(label, column pair name, paper, ours, ours_se)]``.

    Parameters
    ----------
    header : list of str
        The table's header cells.
    rows : list of list of str
        Its body's cells.

    Returns
    -------
    list of tuple
        One entry per row and paper/ours column pair where both cells hold numbers.
    """
    pairs = []
    for a, name in enumerate(header):
        if "paper" in name.lower():
            b = next((j for j in range(a + 1, len(header)) if "ours" in header[j].lower()), None)
            if b is not None and not any(b == q for _, q in pairs):
                pairs.append((a, b))
    points = []
    for cells in rows:
        label = " / ".join(c for c in cells[:2] if c)
        for a, b in pairs:
            if max(a, b) >= len(cells):
                continue
            paper, ours = _number(cells[a]), _number(cells[b])
            if paper is not None and ours is not None:
                points.append((label, f"{header[a]} vs {header[b]}", paper[0], ours[0], ours[1]))
    return points


def paired_dot_plot(points, title, path):
    """Draw ``points`` (:func:`table_points`) as a paired dot plot and save it to ``path`` (PNG).

    Parameters
    ----------
    points : list of tuple
        ``(label, column pair, paper, ours, ours_se)``.
    title : str
        The figure's title (the paper table).
    path : pathlib.Path
        Where to save it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(points)
    fig, ax = plt.subplots(figsize=(7.5, 0.22 * n + 1.4))
    ys = list(range(n))[::-1]
    for y, (_, _, paper, ours, se) in zip(ys, points):
        ax.plot([paper, ours], [y, y], color="0.75", lw=1, zorder=1)
    ax.scatter([p[2] for p in points], ys, facecolors="none", edgecolors="tab:blue", label="paper", zorder=2)
    ax.errorbar([p[3] for p in points], ys, xerr=[p[4] or 0.0 for p in points], fmt="o", color="tab:orange",
                ms=4, capsize=2, label="ours (mean +- s.e.)", zorder=3)
    multi = len({p[1] for p in points}) > 1
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{p[0]} ({p[1]})" if multi else p[0] for p in points], fontsize=6)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_figures(lines, results_dir, heading="## Results by paper table"):
    """Draw one figure per ``### `` table of the section ``heading`` in ``lines`` (RESULTS.md's lines) and insert
    a link to it under the table; return the new lines. Tables without a plottable pair get none.

    Parameters
    ----------
    lines : list of str
        RESULTS.md's lines.
    results_dir : pathlib.Path
        The results folder (figures go to its ``figures/``).
    heading : str, optional
        The section holding the paper tables.

    Returns
    -------
    list of str
        ``lines`` with an image link after each plotted table.
    """
    results_dir = pathlib.Path(results_dir)
    out, i = [], 0
    inside = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            inside = line.strip() == heading
        if inside and line.startswith("### "):
            title = line[4:].strip()
            out.append(line)
            i += 1
            while i < len(lines) and not lines[i].startswith("|") and not lines[i].startswith("#"):
                out.append(lines[i])
                i += 1
            table = []
            while i < len(lines) and lines[i].startswith("|"):
                table.append(lines[i])
                i += 1
            out += table
            if len(table) > 2:
                points = table_points(_cells(table[0]), [_cells(t) for t in table[2:]])
                if points:
                    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
                    path = results_dir / "figures" / f"{slug}.png"
                    paired_dot_plot(points, title, path)
                    out += ["", f"![{title}: paper against ours](results/figures/{path.name})"]
            continue
        out.append(line)
        i += 1
    return out
