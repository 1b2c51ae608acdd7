"""Execute the teaching notebooks at their full sizes and store their outputs (figures, tables) in the files.

    python notebooks/run_all.py [NOTEBOOK ...]          # all five by default; a few minutes on 2 cores

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working directory and
``METRICOPT_NB_SMALL`` unset (the full sizes), this checkout first on ``PYTHONPATH``; a cell that raises (the
notebooks check their key results with ``assert``) stops the run and the file is left as it was. The
executed notebook is written in place with its outputs, so that the figures show where the repository is
browsed; ``metadata.metricopt`` records the metricopt version, the date and the seconds it took.
``tests/test_notebooks.py`` checks that the committed files carry their outputs and no error, and runs every
notebook again at the small size.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def run(path: Path, timeout: int = 1800) -> float:
    """Execute ``path`` at full size and write it back with its outputs; returns the seconds it took."""
    import nbclient
    import nbformat

    env_small = os.environ.pop("METRICOPT_NB_SMALL", None)
    env_mpl = os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend stores the figures as PNG outputs
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    try:
        nb = nbformat.read(path, as_version=4)
        client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                         resources={"metadata": {"path": str(HERE)}})
        t0 = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - t0
    finally:
        if env_small is not None:
            os.environ["METRICOPT_NB_SMALL"] = env_small
        if env_mpl is not None:
            os.environ["MPLBACKEND"] = env_mpl
    sys.path.insert(0, str(ROOT))
    import metricopt

    nb.metadata["metricopt"] = {"version": metricopt.__version__, "executed": datetime.date.today().isoformat(),
                                "seconds": round(seconds, 1), "sizes": "full"}
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="notebook files (default: every notebooks/*.ipynb)")
    a = ap.parse_args(argv)
    paths = [Path(p).resolve() for p in a.notebooks] or sorted(HERE.glob("*.ipynb"))
    for p in paths:
        print(f"{p.name}: running ...", flush=True)
        print(f"{p.name}: {run(p):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
