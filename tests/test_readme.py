"""The README's "Write your own term" example runs as printed and its term is certified."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_write_your_own_term_example_runs_and_is_certified(capsys):
    code = [b for b in _blocks() if "class OffDiagonalAbs" in b]
    assert len(code) == 1
    preamble = ("import metricopt as mo\nfrom sklearn.datasets import load_wine\n"
                "from sklearn.preprocessing import StandardScaler\nX, y = load_wine(return_X_y=True)\n"
                "X = StandardScaler().fit_transform(X)[::2]\ny = y[::2]\n")
    scope: dict = {}
    exec(compile(preamble + code[0], "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    assert "optimal within tol" in out
    problem = scope["problem"]
    cert = scope["mo"].certify(problem, scope["mo"].solve(problem, backend="cvxpy"))
    assert cert.is_optimal and cert.details["dual form"].startswith("generic")
