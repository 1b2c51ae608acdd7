"""The README's main command (`metricopt demo`) runs and reports what it promises."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metricopt.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _parse_errors(out):
    m = re.search(r"3-NN test error: Euclidean ([\d.]+)%\s+->\s+learned metric ([\d.]+)%", out)
    assert m, out
    return float(m.group(1)), float(m.group(2))


def test_demo_command_runs_and_certifies():
    """`metricopt demo` (the console script when installed, else `python -m metricopt`)."""
    exe = shutil.which("metricopt")
    cmd = [exe, "demo"] if exe else [sys.executable, "-m", "metricopt", "demo"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "LMNN on wine" in out
    assert "status optimal" in out
    assert "LMNN certificate: optimal within tol" in out
    rel = float(re.search(r"relative ([0-9.e+-]+)\)", out).group(1))
    assert rel <= 1e-6
    before, after = _parse_errors(out)
    assert after <= before


@pytest.mark.parametrize("method", ["mmc", "pola"])
def test_demo_other_methods(method, capsys):
    assert main(["demo", "--dataset", "iris", "--method", method]) == 0
    out = capsys.readouterr().out
    assert f"{method.upper()} on iris" in out
    assert "certificate:" in out
    _parse_errors(out)


def test_cli_rejects_unknown_dataset(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--dataset", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_cli_reports_metricopt_errors(capsys):
    assert main(["demo", "--dataset", "iris", "--k", "0"]) == 2
    assert "metricopt: error: k must be >= 1; got 0." in capsys.readouterr().err
