"""Tests that run lucid on two MPI processes (``mpiexec -n 2``: on this machine, and in
test_two_hosts.py on two simulated hosts, network namespaces joined by a veth link).

They run with ``make test-distributed`` (which installs the ``distributed`` extra into .venv
first) or ``pytest tests/distributed``; the plain ``pytest`` run of the whole suite leaves
them out, as each launches processes and they need mpi4py and MPICH.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
MPI_RANKS = 2


def _asked_for(config) -> bool:
    if os.environ.get("LUCID_DISTRIBUTED_TESTS") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    if Path(collection_path).name.startswith("test_") and not _asked_for(config):
        return True
    return None


def mpiexec_path():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


@pytest.fixture(scope="session")
def mpiexec():
    import importlib.util

    path = mpiexec_path()
    missing = [
        what
        for what, ok in (("mpi4py", importlib.util.find_spec("mpi4py") is not None), ("mpiexec", path is not None))
        if not ok
    ]
    if missing:
        message = (
            f"{' and '.join(missing)} not installed: `make test-distributed` (or "
            f"pip install '.[distributed]') installs them"
        )
        if os.environ.get("LUCID_REQUIRE_MPI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


class Run:
    def __init__(self, returncode, out, seconds):
        self.returncode, self.out, self.seconds = returncode, out, seconds


def run_processes(cmd, timeout, env=None):
    """Runs `cmd` in its own session and kills the whole session (mpiexec, its proxies and
    the ranks) if it outlives `timeout`: a hang fails the test instead of blocking it."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=full_env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s (a hang); its output:\n{out}")
    return Run(proc.returncode, out, time.monotonic() - start)


def run_workers(mpiexec, script, *args, n=MPI_RANKS, timeout=120, env=None):
    """The worker script under tests/distributed on n MPI processes (for module fixtures,
    which cannot take the function-scoped ``run_mpi``)."""
    return run_processes([mpiexec, "-n", str(n), sys.executable, str(HERE / script), *map(str, args)], timeout, env)


@pytest.fixture
def run_mpi(mpiexec):
    """``run_mpi(script, *args, n=2, timeout=120, env=None)``: run_workers with this session's
    mpiexec."""

    def run(script, *args, n=MPI_RANKS, timeout=120, env=None):
        return run_workers(mpiexec, script, *args, n=n, timeout=timeout, env=env)

    return run


@pytest.fixture
def run_single():
    """The worker script as one plain process (world size 1, no mpiexec)."""

    def run(script, *args, timeout=120, env=None):
        return run_processes([sys.executable, str(HERE / script), *map(str, args)], timeout, env)

    return run


def check_ok(run):
    assert run.returncode == 0, f"exit code {run.returncode}; output:\n{run.out}"


def rank_arrays(tmp_path_factory, mpiexec, script, ranks):
    """Runs `script` on `ranks` ranks into a fresh folder and loads each rank's rank<r>.npz."""
    out = tmp_path_factory.mktemp(Path(script).stem)
    check_ok(run_workers(mpiexec, script, out, n=ranks))
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(ranks)]
