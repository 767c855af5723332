"""Two lucid processes busy on the same cores: each notices, and runs its parallel loops on its
calling thread alone instead of waiting for threads the other process keeps off the cores
(bench/suite.py's two-process table measures what that saves)."""

import os
import subprocess
import sys

import pytest

from _support import record, scale

WORKER = """
import sys, time
import numpy as np
import lucid
from lucid._C import threads_contended as solo

a = lucid.tensor(np.random.default_rng(0).random(1_000_000).astype(np.float32))
start, first, ops = time.perf_counter(), None, 0
while time.perf_counter() - start < float(sys.argv[1]):
    a.exp()
    ops += 1
    if first is None and solo():
        first = time.perf_counter() - start
print(ops, -1 if first is None else first)
"""

# Busy on one core for `burst` seconds, then idle for `gap`, until `total` seconds have passed:
# a daemon or a build step that wakes now and then.
BURSTER = """
import sys, time
burst, gap, total = map(float, sys.argv[1:])
start = time.perf_counter()
while time.perf_counter() - start < total:
    t = time.perf_counter()
    while time.perf_counter() - t < burst:
        pass
    time.sleep(gap)
"""


def _run(*argvs):
    procs = [
        subprocess.Popen([sys.executable, "-c", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for argv in argvs
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out)
    return outs


@pytest.mark.skipif(sys.platform != "linux", reason="the engine's loops share oneDNN's GNU OpenMP pool on Linux")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no parallel loops")
def test_two_processes_on_the_same_cores_each_run_their_loops_alone():
    seconds = scale(3.0, 8.0)
    results = [tuple(map(float, out.split())) for out in _run((WORKER, str(seconds)), (WORKER, str(seconds)))]
    # Each process's exps want every core; with two at once, both must have gone solo.
    assert all(first >= 0 for _, first in results), results
    record(
        "Shared machines",
        "two processes running 1M-element exps on the same cores at once, "
        f"{seconds:g} s each ({sum(int(ops) for ops, _ in results)} ops)",
        2,
        f"each noticed the other within {max(first for _, first in results):.1f} s of starting (the first "
        "0.5 s are not judged) and ran its loops on its calling thread alone",
    )


@pytest.mark.skipif(sys.platform != "linux", reason="the engine's loops share oneDNN's GNU OpenMP pool on Linux")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no parallel loops")
def test_a_process_busy_on_a_core_for_moments_does_not_take_the_threads_away():
    # Bursts of 30 ms every 0.2 s make some windows of regions contended, but never four in a
    # row: the loops keep their threads.
    seconds = scale(3.0, 8.0)
    bursters = [(BURSTER, "0.03", "0.2", str(seconds + 1))] * ((os.cpu_count() or 2) // 2)
    out, *_ = _run((WORKER, str(seconds)), *bursters)
    ops, first = out.split()
    assert float(first) < 0, f"went solo {float(first):.2f} s after starting"
    record(
        "Shared machines",
        f"a process running 1M-element exps for {seconds:g} s ({ops} ops) beside another busy on a "
        "core for 30 ms of every 230",
        1,
        "it kept its threads throughout",
    )
