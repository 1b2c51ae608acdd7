"""Configuration of the LMNN paper checks (``python -m pytest paper_checks -m slow -s``).

* Points the data loaders at the shared data folder: ``$METRICOPT_DATA`` when set, else
  ``/work/shared/data``; every check is skipped, with the reason, when that folder is absent.
* ``--paper-splits N`` sets the number of splits of every check (it sets the environment
  variable ``METRICOPT_PAPER_SPLITS``; ``METRICOPT_PAPER_SPLITS_<CHECK>``, e.g.
  ``METRICOPT_PAPER_SPLITS_LETTER_RECOGNITION=3``, sets one check's).
* At the end of a session that ran any check, ``RESULTS.md`` is rebuilt from
  ``results/*.json`` by ``make_results.py`` (tables are never typed by hand).
"""

import os
import pathlib
import shlex
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_DATA = pathlib.Path("/work/shared/data")

if str(HERE) not in sys.path:  # the checks import _common and make_results from here
    sys.path.insert(0, str(HERE))


def _data_folder():
    raw = os.environ.get("METRICOPT_DATA", "")
    return pathlib.Path(raw).expanduser() if raw else DEFAULT_DATA


def pytest_addoption(parser):
    parser.addoption(
        "--paper-splits", action="store", default=None, type=int,
        help="number of random splits of every LMNN paper check (default: per check, see RESULTS.md)",
    )


def pytest_configure(config):
    n = config.getoption("--paper-splits", default=None)
    if n is not None:
        if n < 1:
            raise pytest.UsageError(f"--paper-splits must be a positive integer; got {n}.")
        os.environ["METRICOPT_PAPER_SPLITS"] = str(n)
    folder = _data_folder()
    if folder.is_dir():
        os.environ["METRICOPT_DATA"] = str(folder)
    # the command recorded in the result files (and in RESULTS.md)
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith("METRICOPT_PAPER_SPLITS") or k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    args = " ".join(shlex.quote(a) for a in config.invocation_params.args)
    os.environ.setdefault("METRICOPT_PAPER_COMMAND", f"{env + ' ' if env else ''}python -m pytest {args}")


def pytest_collection_modifyitems(config, items):
    folder = _data_folder()
    if folder.is_dir():
        return
    skip = pytest.mark.skip(
        reason=f"data folder {str(folder)!r} not found: set METRICOPT_DATA to the shared data folder "
        "(uci/, faces/, digits/ and SHA256SUMS) to run the paper checks"
    )
    for item in items:
        if pathlib.Path(item.path).resolve().is_relative_to(HERE):
            item.add_marker(skip)


_ran = {"any": False}


def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.split("::")[0].rsplit("/", 1)[-1].startswith("test_paper_"):
        _ran["any"] = True


def pytest_sessionfinish(session, exitstatus):
    if not _ran["any"]:
        return
    import make_results

    path = make_results.build()
    print(f"\nRESULTS.md rebuilt: {path}")
