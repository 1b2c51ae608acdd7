"""Run every paper check and its identity run, a few at a time on one core each, then rebuild RESULTS.md.

    python paper_checks/run_all.py [--jobs N] [--only MODULE ...] [--no-identity] [--logs DIR] [--dry-run]

Each ``test_paper_*.py`` module is one job and its identity run (``METRICOPT_PAPER_IDENTITY=1``) another. A job
runs ``python -m pytest -p no:cacheprovider --noconftest paper_checks/<module> -m slow -s -q`` with one BLAS and
one XLA thread, pinned to a core of its own where the operating system allows it, so that ``--jobs`` checks share
the machine without slowing each other down. The jobs that took longest in the stored results start first. Each
job's output goes to ``<logs>/<job>.log``; RESULTS.md is rebuilt once all have finished.

For results that all describe one commit, run it on a clean checkout (a ``git worktree`` of the commit) and
change nothing under ``metricopt/`` or ``paper_checks/`` while it runs: each result records the commit it started
at (``+dirty`` when the code differed from it).

Exit status 0 when every check passed (known mismatches included) and every identity run failed, as it must: an
identity run that passes means its check cannot fail.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from make_results import TEST_MODULE  # noqa: E402


def _data_folder() -> pathlib.Path:
    """The data folder the checks use (``paper_checks/conftest.py``'s rule, loaded under its own name: another
    ``conftest`` may be imported already)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_checks_conftest", HERE / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._data_folder()

#: one thread for BLAS, OpenMP and XLA's CPU backend: a job uses the one core it is pinned to
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}


@dataclass
class Job:
    """One pytest run: a check module, or its identity run; ``expected_s``: the stored results' wall times."""

    module: str
    identity: bool
    expected_s: float

    @property
    def name(self) -> str:
        return self.module.removesuffix(".py") + ("-identity" if self.identity else "")

    def command(self) -> str:
        """The command line as the result files record it."""
        flags = ({"METRICOPT_PAPER_IDENTITY": "1"} if self.identity else {}) | ENV
        env = " ".join(f"{k}={v}" for k, v in flags.items())
        return (f"{env} python -m pytest -p no:cacheprovider --noconftest paper_checks/{self.module} -m slow -s "
                "-q")


def plan(results_dir: pathlib.Path, modules: list[str], identity: bool = True) -> list[Job]:
    """The jobs of ``modules`` (and their identity runs), longest first.

    A job's expected time is the sum of the wall times of the stored results (``results_dir/*.json``) whose
    recorded command names the module (an identity job: the identity results); a module with no stored result is
    put first, since its time is unknown.
    """
    spent: dict[tuple[str, bool], float] = {}
    for path in sorted(pathlib.Path(results_dir).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        ran = set(TEST_MODULE.findall(data.get("command") or ""))
        for module in ran & set(modules):
            key = (module, path.stem.endswith("-identity"))
            spent[key] = spent.get(key, 0.0) + float(data.get("wall_time_s", 0.0))
    jobs = [Job(m, ident, spent.get((m, ident), float("inf"))) for m in modules
            for ident in ((False, True) if identity else (False,))]
    return sorted(jobs, key=lambda j: (-j.expected_s, j.name))


def _cores() -> list[int | None]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux: no pinning
        return [None]


def run(jobs: list[Job], n_jobs: int, logs: pathlib.Path) -> dict[str, tuple[int, float]]:
    """Run ``jobs`` ``n_jobs`` at a time from the repository root; return ``{name: (exit status, seconds)}``."""
    cores = _cores()
    free = [cores[i % len(cores)] for i in range(n_jobs)]
    todo, running, done = list(jobs), {}, {}
    logs.mkdir(parents=True, exist_ok=True)
    while todo or running:
        while todo and free:
            job, core = todo.pop(0), free.pop(0)
            env = {**os.environ, **ENV, "METRICOPT_PAPER_COMMAND": job.command(), "METRICOPT_DATA": str(_data_folder())}
            env.pop("METRICOPT_PAPER_IDENTITY", None)
            if job.identity:
                env["METRICOPT_PAPER_IDENTITY"] = "1"
            log = open(logs / f"{job.name}.log", "w", encoding="utf-8")
            pin = (lambda c=core: os.sched_setaffinity(0, {c})) if core is not None else None
            proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--noconftest",
                                     f"paper_checks/{job.module}", "-m", "slow", "-s", "-q"],
                                    cwd=HERE.parent, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin)
            running[proc] = (job, core, log, time.perf_counter())
            print(f"{time.strftime('%H:%M:%S')} start {job.name} (core {core})", flush=True)
        time.sleep(1.0)
        for proc in [p for p in running if p.poll() is not None]:
            job, core, log, t0 = running.pop(proc)
            log.close()
            free.append(core)
            done[job.name] = (proc.returncode, time.perf_counter() - t0)
            print(f"{time.strftime('%H:%M:%S')} end {job.name}: exit {proc.returncode}, "
                  f"{done[job.name][1] / 60:.1f} min", flush=True)
    return done


def verdict(jobs: list[Job], done: dict[str, tuple[int, float]]) -> list[str]:
    """The problems of a finished run: a check that failed, an identity run that passed (its check cannot fail)."""
    out = []
    for job in jobs:
        status = done[job.name][0]
        if job.identity and status == 0:
            out.append(f"{job.name}: the identity run passed: its check cannot fail")
        elif not job.identity and status != 0:
            out.append(f"{job.name}: failed (exit {status}; see its log)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=len(_cores()), help="checks at a time (default: one per core)")
    parser.add_argument("--only", nargs="+", metavar="MODULE", help="these test modules (e.g. test_paper_uci.py)")
    parser.add_argument("--no-identity", action="store_true", help="skip the identity runs")
    parser.add_argument("--logs", type=pathlib.Path, default=None, help="folder of the jobs' output (default: a "
                        "new temporary folder)")
    parser.add_argument("--dry-run", action="store_true", help="print the jobs and their commands only")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    modules = sorted(p.name for p in HERE.glob("test_paper_*.py"))
    if args.only:
        unknown = sorted(set(args.only) - set(modules))
        if unknown:
            parser.error(f"no such check module: {', '.join(unknown)} (the modules: {', '.join(modules)})")
        modules = sorted(args.only)
    if not _data_folder().is_dir():
        parser.error(f"data folder {str(_data_folder())!r} not found: set METRICOPT_DATA to the shared data folder")
    jobs = plan(HERE / "results", modules, identity=not args.no_identity)
    if args.dry_run:
        for job in jobs:
            stored = "unknown" if job.expected_s == float("inf") else f"{job.expected_s / 60:.1f} min"
            print(f"{job.name} (stored: {stored}): {job.command()}")
        return 0
    logs = args.logs or pathlib.Path(tempfile.mkdtemp(prefix="paper-checks-"))
    print(f"{len(jobs)} jobs, {args.jobs} at a time; logs in {logs}", flush=True)
    done = run(jobs, args.jobs, logs)
    import make_results

    print(f"RESULTS.md rebuilt: {make_results.build()}")
    problems = verdict(jobs, done)
    for p in problems:
        print(f"- {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
