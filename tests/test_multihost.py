"""Several hosts through JAX's own distributed runtime: two processes on this machine (one CPU device each, joined
by ``jax.distributed.initialize`` and gloo collectives) solve one LMNN problem with ``devices="all"``, the active
triplets sharded over both processes' devices, and each gets the certified result one process gets alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    pid, port = int(sys.argv[1]), sys.argv[2]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid,
                               initialization_timeout=120)
    import numpy as np
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler
    import metricopt
    X, y = load_iris(return_X_y=True)
    p = metricopt.LMNNProblem(StandardScaler().fit_transform(X), y, k=3, mu=0.5)
    sol = p.solve(backend="jax", tol=1e-6, devices="all")
    out = {"pid": pid, "global": len(jax.devices()), "local": len(jax.local_devices()), "status": str(sol.status),
           "objective": sol.objective, "gap": sol.stats.get("certificate_rel_gap"), "devices": sol.stats["devices"],
           "iterations": sol.stats["iterations"], "M": np.asarray(sol.M).tolist()}
    print("RESULT" + json.dumps(out), flush=True)
    jax.distributed.shutdown()
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_processes():
    port = str(_free_port())
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(pid), port], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    outs = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert proc.returncode == 0, stderr[-3000:]
        outs.append(json.loads(next(ln for ln in stdout.splitlines() if ln.startswith("RESULT"))[len("RESULT"):]))
    return outs


def test_two_processes_get_the_certified_result_of_one(two_processes):
    X, y = load_iris(return_X_y=True)
    alone = metricopt.LMNNProblem(StandardScaler().fit_transform(X), y, k=3, mu=0.5).solve(backend="jax", tol=1e-6)
    assert str(alone.status) == "optimal"
    for out in two_processes:
        assert out["global"] == 2 and out["local"] == 1 and out["devices"] == 2  # sharded over both processes
        assert out["status"] == "optimal" and out["gap"] <= 1e-6
        assert out["iterations"] == alone.stats["iterations"]
        assert out["objective"] == pytest.approx(alone.objective, rel=1e-10)
        M = np.asarray(out["M"])
        assert np.abs(M - alone.M).max() <= 1e-8 * np.abs(alone.M).max()
    # both processes hold the same metric, to the last bit
    assert two_processes[0]["M"] == two_processes[1]["M"]
