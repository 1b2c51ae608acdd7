"""The README's main command (`metricopt demo`) runs and reports what it promises."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import metricopt
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


# --------------------------------------------------------------------------- fit / predict / info


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err):
    assert err.startswith("metricopt: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


def test_fit_predict_info_round_trip(tmp_path, monkeypatch, capsys):
    """fit on iris (exact backend) -> model file -> predict the held-out part -> same error; info shows it."""
    import numpy as np

    from metricopt.io import load_model, read_model_file

    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["fit", "--method", "lmnn", "--data", "iris", "--k", "3", "--out", "model.npz"], capsys)
    assert code == 0, err
    assert "LMNN on iris (105 train / 45 test points, 4 features, preprocessing: standard scaling)" in out
    assert "[metricopt cvxpy] round 1: working set" in out  # progress: the working-set rounds
    assert "SCS v" not in out and "CVXPY" not in out  # the solver's own log is not shown
    assert "solve: status optimal" in out
    assert "LMNN certificate: optimal within tol" in out
    assert float(re.search(r"relative ([0-9.e+-]+)\)", out).group(1)) <= 1e-6
    before, after = _parse_errors(out)
    assert "model saved to model.npz" in out

    code, out, err = _run(["predict", "--model", "model.npz", "--data", "iris", "--split", "test"], capsys)
    assert code == 0, err
    m = re.search(r"LMNN model on iris \(test, 45 points, knn rule, k=3\): error ([\d.]+)% \((\d+) of 45", out)
    assert m, out
    assert float(m.group(1)) == after  # the held-out error printed by fit, recomputed from the file

    code, out, err = _run(["predict", "--model", "model.npz", "--data", "iris", "--out", "pred.csv"], capsys)
    assert code == 0 and "150 predictions written to pred.csv" in out
    rows = (tmp_path / "pred.csv").read_text().splitlines()
    assert rows[0] == "prediction,label" and len(rows) == 151
    est = load_model("model.npz")
    from metricopt.datasets import load

    X, y = load("iris")
    expected = est.predict(est.preprocessing_.transform(X))
    assert [int(r.split(",")[0]) for r in rows[1:]] == expected.tolist()

    code, out, err = _run(["info", "--model", "model.npz"], capsys)
    assert code == 0, err
    assert "format        : metricopt-model version 2, written by metricopt" in out
    assert "problem       : LMNN (Weinberger & Saul, JMLR 10:207-244, 2009, Eq. 14), k=3, mu=0.5" in out
    assert "training data : 105 points, 4 features" in out
    assert "certificate   : optimal within tol" in out
    assert "data / split  : iris, test size 0.3, seed 0" in out
    sha = read_model_file("model.npz").metadata["sha256"]
    assert f"sha256        : {sha} (verified)" in out
    code, out, _ = _run(["info", "--model", "model.npz", "--json"], capsys)
    import json

    meta = json.loads(out)
    assert meta["info"]["knn_test_error_learned"] * 100 == pytest.approx(after, abs=0.005)
    assert meta["preprocessing"]["scale"] == "standard"
    assert np.isclose(meta["info"]["knn_test_error_euclidean"] * 100, before, atol=0.005)


def _iris_csv(path, rows=slice(None), label=True, header=True):
    from metricopt.datasets import load

    X, y = load("iris")
    names = ["setosa", "versicolor", "virginica"]
    lines = (["sepal_l,sepal_w,petal_l,petal_w" + (",species" if label else "")] if header else [])
    for x, c in zip(X[rows], y[rows]):
        lines.append(",".join(f"{v:g}" for v in x) + (f",{names[c]}" if label else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_csv_with_plot_and_predict_unlabelled(tmp_path, capsys):
    data = _iris_csv(tmp_path / "flowers.csv", rows=slice(None, None, 2))
    model, fig = tmp_path / "pola.npz", tmp_path / "fig.png"
    code, out, err = _run(["fit", "--method", "pola", "--data", str(data), "--pca", "3", "--out", str(model),
                           "--plot", str(fig)], capsys)
    assert code == 0, err
    assert "POLA on " in out and "preprocessing: standard scaling, PCA to 3 dimensions" in out
    assert "POLA certificate: optimal within tol" in out
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and fig.stat().st_size > 5000
    assert f"plot saved to {fig}" in out

    unlabelled = _iris_csv(tmp_path / "new.csv", rows=slice(1, None, 10), label=False, header=False)
    code, out, err = _run(["predict", "--model", str(model), "--data", str(unlabelled)], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert set(lines[:15]) <= {"setosa", "versicolor", "virginica"} and len(lines) == 16
    assert "(15 points, knn rule, k=3): no labels, no error computed" in lines[-1]

    labelled = _iris_csv(tmp_path / "lab.csv", rows=slice(1, None, 2))
    code, out, err = _run(["predict", "--model", str(model), "--data", str(labelled)], capsys)
    assert code == 0, err
    assert re.search(r"error [\d.]+% \(\d+ of 75 misclassified\)", out)

    # the model's own file, now without its label column: its split cannot be recovered
    _iris_csv(data, rows=slice(None, None, 2), label=False, header=False)
    code, _, err = _run(["predict", "--model", str(model), "--data", str(data), "--split", "test"], capsys)
    assert code == 2
    assert _one_line_error(err) == (f"metricopt: error: --split test recovers the model's stratified split from the "
                                    f"labels; {str(data)!r} has no label column. Use --split all.")


def test_fit_jax_backend_shows_live_progress_and_history_plot(tmp_path, capsys):
    model, fig = tmp_path / "m.npz", tmp_path / "h.png"
    code, out, err = _run(["fit", "--method", "lmnn", "--data", "iris", "--backend", "jax", "--time-limit", "30",
                           "--out", str(model), "--plot", str(fig)], capsys)
    assert code == 0, err
    prog = [ln for ln in out.splitlines() if ln.startswith("[metricopt jax/fista]")]
    assert re.match(r"\[metricopt jax/fista\] memory estimate: [\d.]+ MB on the device, [\d.]+ MB on the host", prog[0])
    assert prog[1:] and all(re.search(r"objective \S+\s+certified gap .*active\s+\d+\s+[\d.]+s", ln)
                            for ln in prog[1:])
    assert "backend jax" in out and "LMNN certificate:" in out
    from metricopt.io import read_model_file

    meta = read_model_file(model).metadata
    assert meta["solution"]["backend"] == "jax" and meta["solution"]["stats"]["history"]
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_error_messages(tmp_path, capsys):
    code, _, err = _run(["fit", "--data", "nope", "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 2
    assert _one_line_error(err).startswith("metricopt: error: unknown data set 'nope'; choose one of: 'iris',")
    assert err.strip().endswith("Or give the path of a .csv file (last column = label).")

    code, _, err = _run(["fit", "--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 2
    missing = str(tmp_path / "missing.csv")
    assert _one_line_error(err) == f"metricopt: error: cannot read {missing!r}: No such file or directory."

    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,a\n3,x,b\n")
    code, _, err = _run(["fit", "--data", str(bad), "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 2
    assert _one_line_error(err) == f"metricopt: error: {str(bad)!r}: data row 2, column 2 is not a number: 'x'."

    code, _, err = _run(["fit", "--method", "pca", "--data", "iris", "--time-limit", "5", "--out",
                         str(tmp_path / "m.npz")], capsys)
    assert code == 2
    assert _one_line_error(err) == ("metricopt: error: --time-limit bounds an iterative solve (lmnn, mmc, pola, mlcc, "
                                    "nca, gerrymander, local); --method pca is computed in closed form; drop "
                                    "--time-limit.")

    code, _, err = _run(["fit", "--method", "gerrymander", "--data", "iris", "--solver-tol", "1e-6", "--out",
                         str(tmp_path / "m.npz")], capsys)
    assert code == 2
    assert "--solver-tol is the exact backend's conic solver accuracy" in _one_line_error(err)

    code, _, err = _run(["fit", "--method", "rca", "--data", "iris", "--tol", "1e-3", "--out",
                         str(tmp_path / "m.npz")], capsys)
    assert code == 2
    assert _one_line_error(err) == "metricopt: error: --tol does not apply to --method rca (RCA takes no tol); drop --tol."

    code, _, err = _run(["fit", "--data", "iris", "--out", str(tmp_path / "no" / "m.npz")], capsys)
    assert code == 2 and "the folder" in _one_line_error(err) and "does not exist" in err

    code, _, err = _run(["predict", "--model", str(tmp_path / "none.npz"), "--data", "iris"], capsys)
    assert code == 2
    none = str(tmp_path / "none.npz")
    assert _one_line_error(err).startswith(f"metricopt: error: model file {none!r} does not exist")

    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"\x00" * 100)
    code, _, err = _run(["info", "--model", str(junk)], capsys)
    assert code == 2
    assert _one_line_error(err) == (f"metricopt: error: {str(junk)!r} is not a metricopt model file: it is not an "
                                    ".npz (zip) archive, or it is truncated.")
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*"))


def test_predict_wrong_number_of_features(tmp_path, capsys):
    model = tmp_path / "mmc.npz"
    assert main(["fit", "--method", "mmc", "--data", "iris", "--quiet", "--out", str(model)]) == 0
    capsys.readouterr()
    code, _, err = _run(["predict", "--model", str(model), "--data", "wine"], capsys)
    assert code == 2
    assert _one_line_error(err) == f"metricopt: error: 'wine' has 13 features, but the model {str(model)!r} expects 4."
    three = tmp_path / "three.csv"
    three.write_text("1,2,3\n4,5,6\n")
    code, _, err = _run(["predict", "--model", str(model), "--data", str(three)], capsys)
    assert code == 2
    assert _one_line_error(err) == (f"metricopt: error: {str(three)!r} has 3 columns, but the model expects 4 features "
                                    "(4 columns, or 5 with the label last).")
    code, _, err = _run(["predict", "--model", str(model), "--data", "iris", "--rule", "energy"], capsys)
    assert code == 2
    assert "--rule energy is LMNN's energy rule; a MMC model predicts with --rule knn." in _one_line_error(err)
    flowers = _iris_csv(tmp_path / "flowers.csv")
    code, _, err = _run(["predict", "--model", str(model), "--data", str(flowers), "--split", "test"], capsys)
    assert code == 2
    assert _one_line_error(err) == ("metricopt: error: --split test recovers the split of the model's own data set "
                                    f"('iris'); the data given is {str(flowers)!r}. Use --split all.")


@pytest.mark.parametrize("method", ["nca", "lda", "rca", "pca"])
def test_fit_non_convex_and_closed_form_methods(method, tmp_path, capsys):
    model = tmp_path / f"{method}.npz"
    extra = ["--n-components", "2"] if method in ("nca", "pca") else []
    assert main(["fit", "--method", method, "--data", "wine", "--quiet", "--out", str(model), *extra]) == 0
    out = capsys.readouterr().out
    if method == "nca":  # --backend left out: auto, which runs the NumPy path on a CPU and says so
        assert "backend auto" in out and "status stationary" in out and "backend numpy" in out
        assert "no certificate" in out
    else:
        assert "backend closed form" in out and "status closed_form" in out
    assert main(["predict", "--model", str(model), "--data", "wine", "--split", "test"]) == 0
    assert "error" in capsys.readouterr().out
    loaded = metricopt.io.load_model(model)
    assert type(loaded).__name__ == {"nca": "NCA", "lda": "LDA", "rca": "RCA", "pca": "PCA"}[method]


def test_nca_refuses_the_exact_backend_and_baselines_any_backend(tmp_path, capsys):
    assert main(["fit", "--method", "nca", "--backend", "cvxpy", "--data", "wine", "--out", str(tmp_path / "a.npz")]) == 2
    assert ("NCA is not convex: it has no exact conic program. Use --backend numpy or jax, or leave --backend out"
            in capsys.readouterr().err)
    assert main(["fit", "--method", "lmnn", "--backend", "numpy", "--data", "wine", "--out", str(tmp_path / "c.npz")]) == 2
    assert "--backend numpy is NCA's NumPy path; --method lmnn runs on cvxpy (exact) or jax." in capsys.readouterr().err
    assert main(["fit", "--method", "nca", "--backend", "jax", "--n-components", "2", "--data", "wine", "--quiet",
                 "--out", str(tmp_path / "d.npz")]) == 0
    assert metricopt.io.load_model(tmp_path / "d.npz").solution_.backend == "jax"
    assert main(["fit", "--method", "lda", "--backend", "jax", "--data", "wine", "--out", str(tmp_path / "b.npz")]) == 2
    assert "--method lda is computed in closed form (an eigendecomposition); it takes no --backend." in \
        capsys.readouterr().err


def test_fit_gerrymander_with_certified_cccp_steps(tmp_path, capsys):
    model = tmp_path / "g.npz"
    assert main(["fit", "--method", "gerrymander", "--solver", "cccp", "--data", "iris", "--quiet",
                 "--out", str(model)]) == 0
    out = capsys.readouterr().out
    assert "backend own solvers" in out and "status stationary" in out
    # each CCCP step is a convex solve certified to step_tol (1e-7), whichever valid stop ended the loop (a fixed point of the
    # correct sets, a step without descent, or a relative decrease below tol)
    steps = metricopt.io.read_model_file(model).metadata["solution"]["stats"]["history"][1:]
    assert steps and all(h["step_status"] == "optimal" and 0 <= h["step_rel_gap"] <= 1e-7 for h in steps)
    assert main(["predict", "--model", str(model), "--data", "iris", "--split", "test"]) == 0
    assert "error" in capsys.readouterr().out
    assert type(metricopt.io.load_model(model)).__name__ == "GerrymanderingKNN"
    assert main(["fit", "--method", "gerrymander", "--backend", "jax", "--data", "iris",
                 "--out", str(tmp_path / "x.npz")]) == 2
    assert "--method gerrymander has its own solvers" in capsys.readouterr().err


# --------------------------------------------------------------------------- demo options, --help, data folder


def test_demo_fast_with_time_limit_and_progress(capsys):
    """A small --time-limit bounds the solve; the phases are announced; --quiet drops those lines."""
    assert main(["demo", "--dataset", "iris", "--method", "lmnn", "--time-limit", "5"]) == 0
    out = capsys.readouterr().out
    for phase in ("data: loading iris", "solve: backend cvxpy (auto:", "solve: done", "kNN: done"):
        assert phase in out, out
    assert "time limit 5 s" in out and "backend auto" in out
    _parse_errors(out)
    assert main(["demo", "--dataset", "iris", "--method", "pola", "--time-limit", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "[demo" not in out and "[metricopt" not in out
    assert "POLA on iris" in out and "certificate:" in out


def test_demo_jax_backend(capsys):
    assert main(["demo", "--dataset", "iris", "--method", "mmc", "--backend", "jax", "--time-limit", "20"]) == 0
    out = capsys.readouterr().out
    assert "solve: backend jax (--backend)" in out
    assert re.search(r"solve: status \w+, .*backend jax", out), out
    _parse_errors(out)


def test_demo_auto_switches_to_jax_when_the_exact_program_is_too_large(monkeypatch, capsys):
    from metricopt.backends import cvxpy_backend

    monkeypatch.setattr(cvxpy_backend, "MAX_DIM", 2)  # iris has 4 features: the size check refuses it
    assert main(["demo", "--dataset", "iris", "--method", "pola", "--time-limit", "20"]) == 0
    out = capsys.readouterr().out
    assert "the exact backend refused the problem" in out and "too large" in out
    assert "solve: backend jax (auto:" in out


def test_demo_auto_takes_jax_above_the_entry_limit_without_trying_the_exact_backend(monkeypatch, capsys):
    """The size rule of ``--backend auto``: iris MMC's exact program has 3,675 pairs x 16 entries of vec(M); with
    the limit below that the first-order solver runs at once, with the count in the progress line."""
    from metricopt import cli
    from metricopt.backends import cvxpy_backend

    def refuse(*args, **kwargs):
        raise AssertionError("the exact backend was built although the rule chose JAX")

    monkeypatch.setattr(cli, "DEMO_EXACT_ENTRIES", 3_675 * 16 - 1)
    monkeypatch.setattr(cvxpy_backend, "build_program", refuse)
    assert main(["demo", "--dataset", "iris", "--method", "mmc", "--time-limit", "20"]) == 0
    out = capsys.readouterr().out
    assert "solve: backend jax (auto: the exact program would have 58,800 constraint entries, more than 58,799" in out
    monkeypatch.undo()
    assert main(["demo", "--dataset", "iris", "--method", "mmc", "--time-limit", "20"]) == 0
    assert "solve: backend cvxpy (auto: the exact conic program, 58,800 constraint entries)" in capsys.readouterr().out


def test_demo_option_errors(capsys):
    assert main(["demo", "--dataset", "iris", "--time-limit", "0"]) == 2
    assert "time-limit" in _one_line_error(capsys.readouterr().err)
    assert main(["demo", "--dataset", "iris", "--backend", "jax", "--solver", "SCS"]) == 2
    assert "exact backend" in _one_line_error(capsys.readouterr().err)


def _cli(*argv):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "metricopt", *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def test_help_and_version_in_a_fresh_process():
    res = _cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"metricopt {metricopt.__version__}", res
    res = _cli("--help")
    assert res.returncode == 0, res.stderr
    for word in ("--version", "demo", "fit", "predict", "info"):
        assert word in res.stdout
    res = _cli("demo", "--help")
    assert res.returncode == 0, res.stderr
    for opt in ("--dataset", "--method", "--backend", "--solver", "--time-limit", "--quiet", "--verbose"):
        assert opt in res.stdout


def test_help_does_not_import_heavy_modules():
    code = ("import sys\nfrom metricopt.cli import build_parser\n"
            "try:\n    build_parser().parse_args(['demo', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('cvxpy', 'jax', 'sklearn', 'scipy') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_every_option_has_help():
    import argparse

    from metricopt.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.help, f"metricopt {name} {action.option_strings}: no help text"


def test_data_folder_not_found_lists_every_place(tmp_path, monkeypatch, capsys):
    from metricopt import datasets

    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setattr(datasets, "__file__", str(tmp_path / "repo" / "metricopt" / "datasets.py"))
    code, _, err = _run(["fit", "--data", "balance-scale", "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 2
    err = _one_line_error(err)
    assert str(tmp_path / "a" / "shared" / "data") in err and "current directory" in err
    assert str(tmp_path / "shared" / "data") in err and "repository" in err  # beside the repository tmp_path/repo
    assert "--data-dir" in err and datasets.DATA_ENV in err
    monkeypatch.setenv(datasets.DATA_ENV, str(tmp_path / "nowhere"))
    code, _, err = _run(["fit", "--data", "balance-scale", "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 2 and str(tmp_path / "nowhere") in _one_line_error(err)


def test_data_folder_found_beside_the_current_directory(tmp_path, monkeypatch):
    from metricopt import datasets

    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert datasets.find_data_home() == tmp_path / "shared" / "data"


def test_fit_passes_the_shared_options_as_estimator_parameters(tmp_path, capsys, monkeypatch):
    """Issue 31: ``--time-limit`` (and ``--tol``, ``--max-iter``) reach the estimator as its parameters, for every
    iterative method, local distance functions included; what is not given keeps the estimator's own default."""
    from metricopt import cli

    made = {}
    real = cli._make_estimator

    def spy(args):
        est = real(args)
        made[args.method] = est.get_params()
        return est

    monkeypatch.setattr(cli, "_make_estimator", spy)
    code, out, _ = _run(["fit", "--method", "local", "--how", "lda", "--where", "global", "--data", "iris",
                         "--time-limit", "30", "--max-iter", "500", "--quiet", "--out", str(tmp_path / "l.npz")], capsys)
    assert code == 0, out
    assert made["local"]["time_limit"] == 30 and made["local"]["max_iter"] == 500
    assert made["local"]["tol"] == metricopt.LocalMetricKNN().tol  # not given: the estimator's default
    code, out, _ = _run(["fit", "--method", "lmnn", "--data", "iris", "--time-limit", "30", "--quiet", "--out",
                         str(tmp_path / "m.npz")], capsys)
    assert code == 0, out
    assert made["lmnn"]["time_limit"] == 30 and made["lmnn"]["tol"] is None and made["lmnn"]["backend"] == "cvxpy"
